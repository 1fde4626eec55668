"""How a merged section is scored from its chunks.

    .venv/bin/python -m benchmarks.investigations.retrieval_section_scorer

The retrieval dataset (`benchmarks/data/retrieval/`, dev and test) through the real pipeline
(`api.evaluation.harness`, local model, local index), once per `RankingConfig.section_scorer`:
*max* (shipped: a section scores as its best chunk) against *weighted_max_sum* (the note
scorer, 0.7·max + 0.3·sum, which lets a run of many weak chunks outrank the chunk that holds
the exact match; `tests/retrieval/test_search_api.py`) and *max_decayed_sum*. Citation order
is chat's (sections sorted by their own score), so this knob moves the headline metrics if
anything. The report goes to benchmarks/.data/investigations.md.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from api.config import load_settings
from api.evaluation.harness import EvalRun, SearchConfig, default_embedder, eval_server, open_corpus
from api.logging import configure_logging
from api.retrieval.service import RankingConfig
from benchmarks.common import code_revision, machine_note, markdown_table, update_section
from benchmarks.retrieval import CACHE, DATA
from benchmarks.retrieval_quality import BASE_OVERRIDES, combined, split_run
from benchmarks.retrieval_tuning import paired_gain

SCORERS = ("max", "weighted_max_sum", "max_decayed_sum")
SHIPPED, BEFORE = "max", "weighted_max_sum"


async def measure() -> tuple[dict[str, EvalRun], dict[str, set[str]], str]:
    """One evaluation per section scorer on dev + test (embeddings cached in .data/)."""
    from api.evaluation.dataset import load_dataset

    dev = load_dataset(DATA / "notes.jsonl", DATA / "questions_dev.jsonl")
    test = load_dataset(DATA / "notes.jsonl", DATA / "questions_test.jsonl")
    splits = {"dev": {q.id for q in dev.questions}, "test": {q.id for q in test.questions}}
    emb = default_embedder(load_settings(log_level="WARNING", **BASE_OVERRIDES))
    emb.load(CACHE)
    runs: dict[str, EvalRun] = {}
    try:
        with eval_server(None) as url:
            async with open_corpus(
                combined(dev, test), mongo_url=url, settings_overrides=BASE_OVERRIDES, embedder=emb
            ) as corpus:
                r = corpus.report
                corpus_line = f"{r.notes} notes → {r.chunks} chunks"
                for name in SCORERS:
                    search = SearchConfig(ranking=RankingConfig(section_scorer=name))
                    runs[name] = await corpus.evaluate(search=search, label=name)
    finally:
        emb.save(CACHE)
        await emb.aclose()
    return runs, splits, corpus_line


def render(runs: dict[str, EvalRun], splits: dict[str, set[str]], corpus_line: str) -> str:
    rows: list[list[Any]] = []
    for name, run in runs.items():
        by_split = split_run(run, splits, name).splits
        label = name + (
            " (shipped)" if name == SHIPPED else " (baseline)" if name == BEFORE else ""
        )
        for split, m in by_split.items():
            recalls = [f"{m.recall[k]:.3f}" for k in (1, 3, 5)]
            rows.append([label, split, *recalls, f"{m.mrr3:.3f}"])
    table = markdown_table(["section scorer", "split", "R@1", "R@3", "R@5", "MRR@3"], rows)
    gains = []
    for split, ids in splits.items():
        g = paired_gain(runs[SHIPPED].outcomes, runs[BEFORE].outcomes, ids)
        (r3, r3_lo, r3_hi), (m3, m3_lo, m3_hi) = g["recall3"], g["mrr3"]
        gains.append(
            f"- {SHIPPED} − {BEFORE} ({split}): Recall@3 {100 * r3:+.1f} points "
            f"({100 * r3_lo:+.1f} … {100 * r3_hi:+.1f}), MRR@3 {100 * m3:+.1f} "
            f"({100 * m3_lo:+.1f} … {100 * m3_hi:+.1f})."
        )
    return (
        "## Retrieval: scoring a merged section\n\n"
        "Reproduce: `.venv/bin/python -m benchmarks.investigations.retrieval_section_scorer`. "
        f"{machine_note()} Code: {code_revision('api/retrieval')}.\n\n"
        f"The retrieval dataset ({corpus_line}; metrics as in the retrieval benchmark), "
        "hybrid, shipped ranking except the section scorer. Citation order (chat's: sections "
        "sorted by their own score).\n\n"
        f"{table}\n\n" + "\n".join(gains) + "\n\n"
        "Paired differences with 95 % bootstrap intervals; an interval containing 0 is "
        "noise. Sections of this dataset rarely merge more than one chunk, so the scorers "
        "mostly agree here; where a section is a long table or code block split into many "
        "chunks, *max* puts the run holding the best chunk first (the test "
        "`test_the_section_holding_the_exact_match_comes_first`: under the sum the row "
        "asked for is missing from the first section).\n"
    )


def main(argv: list[str] | None = None) -> None:
    """Measure, print, and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-write", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    configure_logging("WARNING")
    report = render(*asyncio.run(measure()))
    print(report)
    if not args.no_write:
        update_section("retrieval_section_scorer", report)


if __name__ == "__main__":
    main()
