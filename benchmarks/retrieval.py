"""Retrieval quality and search latency → the `retrieval` section and two claim rows.

    .venv/bin/python -m benchmarks.retrieval                  # dev + test, everything
    .venv/bin/python -m benchmarks.retrieval --split test --skip-tuning --skip-latency
    .venv/bin/python -m benchmarks.retrieval --notes my/notes.jsonl --questions my/q.jsonl

Quality: section-level Recall@k / MRR@3 (definitions: `api.evaluation.metrics`) of the
real pipeline (`api.evaluation.harness`) with the local embedding model: hybrid vs vector
vs keyword; our chunker vs legacy fixed 512/50 windows vs whole-note chunks; the original
design's note-level embedding baseline; chunk sizes; ranking knobs tuned on DEV only (then checked
on test). Latency and memory: `benchmarks.retrieval_latency`. Embeddings are cached in
benchmarks/.data/ between runs (same text, same model → same vector; `--no-cache` to
recompute everything).
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import structlog

from api.config import load_settings
from api.evaluation.dataset import Dataset, load_dataset
from api.evaluation.harness import (
    EvalCorpus,
    SearchConfig,
    default_embedder,
    eval_server,
    open_corpus,
)
from api.logging import configure_logging
from benchmarks import retrieval_quality as quality
from benchmarks.common import DATA_DIR, REPO_ROOT, update_claims, update_section
from benchmarks.retrieval_latency import measure_size
from benchmarks.retrieval_quality import BASE_OVERRIDES, split_run
from benchmarks.retrieval_report import Results
from benchmarks.retrieval_tuning import ORIGINAL_RANKING, paired_gain, tune_on_dev
from benchmarks.retrieval_writeup import COMMAND, claims, render

log = structlog.get_logger(__name__)

DATA = REPO_ROOT / "benchmarks" / "data" / "retrieval"
CACHE = DATA_DIR / "retrieval-embeddings.npz"
RESULTS = DATA_DIR / "retrieval-results.pkl"  # the last run, for --render-only


def _datasets(args: argparse.Namespace) -> tuple[Dataset, dict[str, set[str]]]:
    if args.notes or args.questions:
        if not (args.notes and args.questions):
            sys.exit("--notes and --questions go together")
        ds = load_dataset(args.notes, args.questions)
        return ds, {"custom": {q.id for q in ds.questions}}
    wanted = ["dev", "test"] if args.split == "both" else [args.split]
    loaded = {s: load_dataset(DATA / "notes.jsonl", DATA / f"questions_{s}.jsonl") for s in wanted}
    first = loaded[wanted[0]]
    data = quality.combined(first, loaded["test"] if len(wanted) == 2 else None)
    return data, {s: {q.id for q in d.questions} for s, d in loaded.items()}


async def _rankings(
    corpus: EvalCorpus, splits: dict[str, set[str]], args: argparse.Namespace, res: Results
) -> None:
    """The original design's ranking vs the shipped defaults, and tuning on dev from it."""
    shipped = SearchConfig()
    original = SearchConfig(ranking=ORIGINAL_RANKING)
    runs = {"shipped": await corpus.evaluate(search=shipped)}
    configs = {"original": original}
    if "dev" in splits and not args.skip_tuning:
        dev_qs = [q for q in corpus.dataset.questions if q.id in splits["dev"]]
        _, tuned, res.trials, res.tuned_columns = await tune_on_dev(corpus, dev_qs, original)
        res.tuned = tuned
        configs["tuned on dev"] = tuned.search
        configs["tuned on dev + BM25 column weights"] = res.tuned_columns.search
    labels = {
        "original": "hybrid, original ranking (rrf_k 60, 0.7·max + 0.3·sum)",
        "tuned on dev": "hybrid, tuned on dev",
        "tuned on dev + BM25 column weights": "hybrid, tuned on dev + BM25 column weights",
    }
    seen = {shipped}
    for name, cfg in configs.items():
        if cfg in seen and name != "original":
            continue
        seen.add(cfg)
        run = runs["shipped"] if cfg == shipped else await corpus.evaluate(search=cfg)
        res.rankings.append(
            split_run(run, splits, labels[name] + (" = shipped" if cfg == shipped else ""))
        )
        if cfg != shipped:
            for split, ids in splits.items():
                key = f"shipped − {name} ({split})"
                res.gains[key] = paired_gain(runs["shipped"].outcomes, run.outcomes, ids)


async def _default_corpus(
    data: Dataset,
    splits: dict[str, set[str]],
    args: argparse.Namespace,
    url: str,
    emb: Any,
    res: Results,
) -> None:
    """Modes, rankings and latency: everything on the default chunking."""
    async with open_corpus(
        data, mongo_url=url, settings_overrides=BASE_OVERRIDES, embedder=emb
    ) as corpus:
        if not args.no_cache:
            emb.save(CACHE)
        r = corpus.report
        res.corpus = f"{r.notes} notes → {r.chunks} chunks (mean {r.mean_chunk_tokens:.0f} tokens)"
        res.modes = await quality.modes(corpus, splits, SearchConfig())
        await _rankings(corpus, splits, args, res)
        if not args.skip_latency:
            await _stage(res, "latency", _latency(corpus, args, emb, res))


async def _latency(corpus: EvalCorpus, args: argparse.Namespace, emb: Any, res: Results) -> None:
    records = await corpus.chunk_records()
    docs = await corpus.db.notes.find({}, {"title": 1, "content_md": 1, "tags": 1}).to_list()
    notes = {str(d["_id"]): d for d in docs}
    queries = [q.question for q in corpus.dataset.questions]
    for size in args.latency_sizes:
        res.latency.append(await measure_size(corpus.db, emb.inner, records, notes, queries, size))


async def _stage(res: Results, name: str, work: Awaitable[None]) -> None:
    """Run one stage; a failure is recorded in the report instead of losing the others."""
    try:
        await work
    except Exception as exc:  # the other stages' numbers are still worth writing
        log.warning("bench.retrieval_stage_failed", stage=name, error=repr(exc)[:300])
        res.errors.append(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")


async def run(args: argparse.Namespace) -> Results:
    data, splits = _datasets(args)
    res = Results(splits=list(splits))
    # The local model whatever the environment says (BASE_OVERRIDES pins the provider).
    emb = default_embedder(load_settings(log_level="WARNING", **BASE_OVERRIDES))
    if not args.no_cache:
        emb.load(CACHE)
    search = SearchConfig()

    async def chunkers(url: str) -> None:
        res.chunkers = await quality.chunkers(
            data, splits, mongo_url=url, embedder=emb, search=search
        )

    async def baselines(url: str) -> None:
        res.baselines = await quality.baselines(data, splits, mongo_url=url, embedder=emb)

    async def sizes(url: str) -> None:
        res.sizes, res.size_gains = await quality.sizes(
            data, splits, mongo_url=url, embedder=emb, search=search
        )

    try:
        with eval_server(args.mongodb_url) as url:
            await _default_corpus(data, splits, args, url, emb, res)
            if not args.skip_chunkers:
                await _stage(res, "chunkers", chunkers(url))
                await _stage(res, "baselines", baselines(url))
            if not args.skip_sizes:
                await _stage(res, "chunk sizes", sizes(url))
    finally:
        if not args.no_cache:
            emb.save(CACHE)
        await emb.aclose()
    return res


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--split", choices=["dev", "test", "both"], default="both")
    parser.add_argument("--notes", type=Path, help="your own notes.jsonl (README format)")
    parser.add_argument("--questions", type=Path, help="your own questions.jsonl")
    parser.add_argument("--mongodb-url", help="use this server instead of the embedded one")
    parser.add_argument(
        "--latency-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[10_000, 100_000]
    )
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-tuning", action="store_true")
    parser.add_argument("--skip-chunkers", action="store_true")
    parser.add_argument("--skip-sizes", action="store_true")
    parser.add_argument("--no-cache", action="store_true", help="recompute every embedding")
    parser.add_argument("--no-write", action="store_true", help="print, do not write")
    parser.add_argument(
        "--render-only",
        action="store_true",
        help=f"re-render the last run's saved results ({RESULTS.name}) without measuring",
    )
    args = parser.parse_args(argv)
    configure_logging("WARNING")
    if args.render_only:
        res = pickle.loads(RESULTS.read_bytes())
    else:
        res = asyncio.run(run(args))
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_bytes(pickle.dumps(res))
    text = render(res, custom=bool(args.notes))
    print(text)
    if not args.no_write and not args.notes:
        update_section("retrieval", text)
        update_claims(claims(res), COMMAND)


if __name__ == "__main__":
    main()
