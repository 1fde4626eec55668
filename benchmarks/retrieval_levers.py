"""Ranking levers, calibrated relevance and chat abstention, on three evaluation sets →
the `retrieval_levers` section of docs/benchmarks/retrieval.md and three claim rows.

    .venv/bin/python -m benchmarks.retrieval_levers                 # everything (~1 h cold)
    .venv/bin/python -m benchmarks.retrieval_levers --render-only   # re-render the last run

Sets: `ours` (benchmarks/data/retrieval, written for this project), `docs` (45 public
documentation pages shipped in PyPI packages, questions written for this project:
benchmarks/data/docs_pages) and `chroma` (the Chroma corpora cut into pages, their own
questions and golden excerpts: benchmarks/chroma_retrieval.py). Each is split into dev and
test by page. Everything is fitted or chosen on the dev splits (pooled) and reported on
the test splits, as paired differences against the shipped ranking with 95 % bootstrap
intervals. Embeddings are cached in benchmarks/.data/.
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from api.config import load_settings
from api.evaluation import load_dataset
from api.evaluation.dataset import Dataset, Question
from api.evaluation.harness import EvalCorpus, default_embedder, eval_server, open_corpus
from api.logging import configure_logging
from benchmarks.chroma_retrieval import build_dataset as chroma_dataset
from benchmarks.common import DATA_DIR, REPO_ROOT, update_claims, update_section
from benchmarks.retrieval_levers_eval import (
    SEARCH_LEVERS,
    QuestionRecord,
    SearchLever,
    collect,
    lever_service,
)
from benchmarks.retrieval_quality import BASE_OVERRIDES, combined

CACHE = DATA_DIR / "levers-embeddings.npz"
RESULTS = DATA_DIR / "levers-results.pkl"
SHIPPED = SearchLever("shipped", "shipped")
FOREIGN_PER_SPLIT = 60  # off-topic questions asked of each corpus, per split
LATENCY_QUESTIONS = 30


@dataclass
class SetResult:
    """One evaluation set: its splits, index and every run's per-question records."""

    name: str
    dataset: Dataset
    splits: dict[str, set[str]]
    corpus: str
    runs: dict[str, list[QuestionRecord]] = field(default_factory=dict)
    foreign: dict[str, list[QuestionRecord]] = field(default_factory=dict)
    latency: dict[str, float] = field(default_factory=dict)  # lever → median time ratio
    search_ms: float = 0.0  # median shipped search, same timing rounds


def _pair(path: str) -> tuple[Dataset, dict[str, set[str]]]:
    dev = load_dataset(REPO_ROOT / path / "notes.jsonl", REPO_ROOT / path / "questions_dev.jsonl")
    test = load_dataset(REPO_ROOT / path / "notes.jsonl", REPO_ROOT / path / "questions_test.jsonl")
    ids = {"dev": {q.id for q in dev.questions}, "test": {q.id for q in test.questions}}
    return combined(dev, test), ids


def load_sets(names: list[str]) -> dict[str, tuple[Dataset, dict[str, set[str]]]]:
    """The evaluation sets by name."""
    loaders = {
        "ours": lambda: _pair("benchmarks/data/retrieval"),
        "docs": lambda: _pair("benchmarks/data/docs_pages"),
        "chroma": lambda: chroma_dataset()[:2],
    }
    return {name: loaders[name]() for name in names}


def _foreign(
    name: str, sets: dict[str, tuple[Dataset, dict[str, set[str]]]], split: str
) -> list[Question]:
    """Other sets' questions of `split` (none of them answerable by this corpus), evenly."""
    pools = [
        [q for q in ds.questions if q.id in splits[split]]
        for other, (ds, splits) in sets.items()
        if other != name
    ]
    per = FOREIGN_PER_SPLIT // max(len(pools), 1)
    return [q for pool in pools for q in pool[:: max(len(pool) // per, 1)][:per]]


async def _latency(corpus: EvalCorpus, res: SetResult) -> None:
    """Median over questions of each search lever's time ÷ the shipped search's, the
    competitors taking turns per question (same process, same questions)."""
    levers = [SHIPPED, *SEARCH_LEVERS]
    services = {lv.name: await lever_service(corpus, lv) for lv in levers}
    times: dict[str, list[float]] = {lv.name: [] for lv in levers}
    questions = list(corpus.dataset.questions[:LATENCY_QUESTIONS])
    for i, q in enumerate(questions):
        order = levers[i % len(levers) :] + levers[: i % len(levers)]
        for lv in order:
            started = time.perf_counter()
            await services[lv.name].search(corpus.author_id, q.question, limit=6, chunks_per_note=3)
            times[lv.name].append(time.perf_counter() - started)
    base = times[SHIPPED.name]
    res.search_ms = sorted(base)[len(base) // 2] * 1000
    for name, ts in times.items():
        ratios = sorted(t / b for t, b in zip(ts, base, strict=True))
        res.latency[name] = ratios[len(ratios) // 2]


async def run_set(
    name: str, sets: dict[str, tuple[Dataset, dict[str, set[str]]]], url: str, emb: Any
) -> SetResult:
    dataset, splits = sets[name]
    async with open_corpus(
        dataset, mongo_url=url, settings_overrides=BASE_OVERRIDES, embedder=emb
    ) as corpus:
        emb.save(CACHE)
        r = corpus.report
        info = f"{r.notes} pages → {r.chunks} chunks (mean {r.mean_chunk_tokens:.0f} tokens)"
        res = SetResult(name, dataset, splits, info)
        for lever in (SHIPPED, *SEARCH_LEVERS):
            res.runs[lever.name] = await collect(corpus, dataset.questions, lever)
        for split in ("dev", "test"):
            res.foreign[split] = await collect(corpus, _foreign(name, sets, split), SHIPPED)
        await _latency(corpus, res)
    return res


async def measure(names: list[str]) -> list[SetResult]:
    configure_logging("WARNING")
    sets = load_sets(names)
    emb = default_embedder(load_settings(log_level="WARNING", **BASE_OVERRIDES))
    emb.load(CACHE)
    out = []
    try:
        with eval_server() as url:
            for name in names:
                out.append(await run_set(name, sets, url, emb))
                print(f"{name}: done", flush=True)
    finally:
        emb.save(CACHE)
        await emb.aclose()
    return out


def main(argv: list[str] | None = None) -> None:
    from benchmarks.retrieval_levers_report import COMMAND, analyse, claims, render

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="ours,docs,chroma")
    parser.add_argument("--render-only", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if args.render_only:
        results = pickle.loads(Path(RESULTS).read_bytes())
    else:
        results = asyncio.run(measure(args.sets.split(",")))
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_bytes(pickle.dumps(results))
    analysis = analyse(results)
    text = render(results, analysis)
    print(text)
    if not args.no_write:
        update_section("retrieval_levers", text)
        update_claims(claims(analysis), COMMAND)


if __name__ == "__main__":
    main()
