"""Search deepening: notes returned and time, when one note crowds the candidate lists.

    .venv/bin/python -m benchmarks.investigations.search_deepening

Each retriever fetches `max(60, limit × chunks_per_note × 4)` chunks. A note whose chunks all
match a query fills those lists, so in one round a search asking for 10 notes gets the
crowding note and little else. `RetrievalService` fetches deeper (×4, up to 4 000) while a
list comes back full and fewer than `limit` notes were found. Measured through the real
pipeline (`api.evaluation.harness`: embedded server, chunker, local model, local index): one
generated note of `--sections` sections, each using the query words, and `--others` notes
mentioning them once in filler text. Baseline in the same run: the same service with
deepening off (one round). The report goes to benchmarks/.data/investigations.md.
*Crowded*: the query words; *plain*: queries on the filler notes' own words, where the
first round already finds the notes (deepening must cost nothing there).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from api.config import load_settings
from api.evaluation.dataset import load_dataset
from api.evaluation.harness import SearchConfig, default_embedder, eval_server, open_corpus
from api.logging import configure_logging
from api.retrieval import service as retrieval_service
from benchmarks.common import code_revision, machine_note, markdown_table, update_section
from benchmarks.retrieval_quality import BASE_OVERRIDES

CROWDED = ["example rule", "an example of an example", "rule example after example"]


def _dataset(folder: Path, sections: int, others: int) -> Path:
    """notes.jsonl/questions.jsonl in the harness's format; returns the notes file."""
    spec = "\n\n".join(
        f"## Rule {i}\n\nExample {i}: an example of an example rule, example after example."
        for i in range(sections)
    )
    notes = [{"id": "spec", "title": "Spec", "content_md": spec, "tags": []}]
    for n in range(others):
        filler = " ".join(f"w{n}x{i} lorem{n} ipsum{n} dolor{n}" for i in range(60))
        body = f"## Part\n\n{filler} One example rule here. {filler}"
        notes.append({"id": f"n{n}", "title": f"Other {n}", "content_md": body, "tags": []})
    (folder / "notes.jsonl").write_text("\n".join(json.dumps(n) for n in notes) + "\n")
    question = {
        "id": "q1",
        "question": "example",
        "gold": [{"note_id": "n0", "headings": ["Part"]}],
    }
    (folder / "questions.jsonl").write_text(json.dumps(question) + "\n")
    return folder / "notes.jsonl"


async def measure(sections: int, others: int, rounds: int, limit: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="autonote-deepen-"))
    notes_file = _dataset(folder, sections, others)
    data = load_dataset(notes_file, folder / "questions.jsonl")
    emb = default_embedder(load_settings(log_level="WARNING", **BASE_OVERRIDES))
    plain = [f"lorem{n} ipsum{n} dolor{n}" for n in range(others)]
    out: dict[str, Any] = {"times": {}, "notes": {}}
    try:
        with eval_server(None) as url:
            async with open_corpus(
                data, mongo_url=url, settings_overrides=BASE_OVERRIDES, embedder=emb
            ) as corpus:
                out["chunks"] = corpus.report.chunks
                service = await corpus.service(SearchConfig())
                shipped_max = retrieval_service.MAX_CANDIDATES
                for mode in ("keyword", "hybrid"):
                    for kind, queries in (("crowded", CROWDED), ("plain", plain)):
                        for query in queries:  # warm the query-embedding cache
                            await service.search(corpus.author_id, query, mode=mode, limit=limit)
                        for label, cap in (("deepening", shipped_max), ("one round", 0)):
                            retrieval_service.MAX_CANDIDATES = cap
                            times, counts = [], []
                            for _ in range(rounds):
                                for query in queries:
                                    started = time.perf_counter()
                                    found = await service.search(
                                        corpus.author_id,
                                        query,
                                        mode=mode,
                                        limit=limit,
                                        chunks_per_note=1,
                                    )
                                    times.append((time.perf_counter() - started) * 1000)
                                    counts.append(len(found.results))
                            key = (mode, kind, label)
                            out["times"][key] = statistics.median(times)
                            out["notes"][key] = statistics.mean(counts)
                        retrieval_service.MAX_CANDIDATES = shipped_max
    finally:
        await emb.aclose()
    return out


def render(res: dict[str, Any], sections: int, others: int, limit: int) -> str:
    rows = []
    for mode in ("keyword", "hybrid"):
        for kind in ("crowded", "plain"):
            deep, one = (mode, kind, "deepening"), (mode, kind, "one round")
            rows.append(
                [
                    mode,
                    kind,
                    f"{res['notes'][deep]:.1f}",
                    f"{res['notes'][one]:.1f}",
                    f"{res['times'][deep]:.1f}",
                    f"{res['times'][one]:.1f}",
                    f"{res['times'][deep] / res['times'][one]:.2f}",
                ]
            )
    table = markdown_table(
        [
            "mode",
            "queries",
            "notes returned, deepening",
            "notes returned, one round",
            "median ms, deepening",
            "median ms, one round",
            "time ÷ one round",
        ],
        rows,
    )
    return (
        "## Search: deepening crowded candidate lists\n\n"
        "Reproduce: `.venv/bin/python -m benchmarks.investigations.search_deepening`. "
        f"{machine_note()} Code: {code_revision('api/retrieval')}.\n\n"
        f"One note of {sections} sections that all use the query words ({res['chunks']} "
        f"chunks in all) and {others} notes that mention them once; `limit` {limit}, one "
        "section per note; query embeddings cached (warm), so the times are retrieval, "
        "fusion, the notes re-check and grouping. *One round* is the same service with "
        f"deepening off. {others + 1} notes match the crowded queries.\n\n"
        f"{table}\n"
    )


def main(argv: list[str] | None = None) -> None:
    """Measure, print, and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", type=int, default=1000)
    parser.add_argument("--others", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--no-write", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    configure_logging("WARNING")
    res = asyncio.run(measure(args.sections, args.others, args.rounds, args.limit))
    report = render(res, args.sections, args.others, args.limit)
    print(report)
    if not args.no_write:
        update_section("search_deepening", report)


if __name__ == "__main__":
    main()
