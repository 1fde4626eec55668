"""Retrieval quality runs for `benchmarks/retrieval.py`: modes, chunkers, baselines, sizes.

Every run goes through `api.evaluation.harness` (the real pipeline). Each corpus is indexed
once and asked ALL questions (dev and test together); outcomes are then split by question
id, so dev and test numbers come from the same index and the same search calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from api.config import DEFAULT_MAX_TOKENS, Settings
from api.evaluation.baselines import evaluate_note_level
from api.evaluation.chunk_size import sweep_chunk_sizes
from api.evaluation.dataset import Dataset
from api.evaluation.harness import EvalCorpus, EvalRun, SearchConfig, open_corpus
from api.evaluation.metrics import Metrics, aggregate
from api.retrieval.backends import Mode
from benchmarks.retrieval_tuning import paired_gain


def _default(name: str) -> Any:
    return Settings.model_fields[name].default


# Explicit values, so a developer's .env (an OpenAI key, another chunk size) cannot change
# what "defaults" means in the report.
BASE_OVERRIDES: dict[str, Any] = {
    "embedding_provider": "local",
    "openai_api_key": None,
    "openai_base_url": None,
    "embedding_model": None,
    "chunking_enabled": True,
    "chunking_strategy": "hierarchical_markdown",
    "chunking_max_tokens": DEFAULT_MAX_TOKENS["hierarchical_markdown"],
    "chunking_min_tokens": _default("chunking_min_tokens"),
}

CHUNKERS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("fixed_tokens 512/50", {"chunking_strategy": "fixed_tokens", "chunking_max_tokens": 512}),
    ("whole_note", {"chunking_strategy": "whole_note"}),
)
SIZES: tuple[int, ...] = (64, 100, 150, 200, 250, 300, 400, 800)


@dataclass(frozen=True, slots=True)
class SplitMetrics:
    """One configuration's metrics on each split."""

    label: str
    splits: dict[str, Metrics]  # split name → metrics
    chunks: int | None = None
    mean_chunk_tokens: float | None = None
    note: str = ""


def split_run(
    run: EvalRun | Sequence[Any], splits: dict[str, set[str]], label: str, **extra: Any
) -> SplitMetrics:
    """Aggregate a run's outcomes separately for each split's question ids."""
    outcomes = run.outcomes if isinstance(run, EvalRun) else run
    return SplitMetrics(
        label,
        {
            name: aggregate([o for o in outcomes if o.question_id in ids])
            for name, ids in splits.items()
        },
        **extra,
    )


def combined(dev: Dataset, test: Dataset | None) -> Dataset:
    """One dataset asking every question (the notes are the same in both files)."""
    if test is None:
        return dev
    return Dataset(notes=dev.notes, questions=dev.questions + test.questions)


async def modes(
    corpus: EvalCorpus, splits: dict[str, set[str]], search: SearchConfig, tag: str = ""
) -> list[SplitMetrics]:
    """Hybrid, vector-only and keyword-only on one corpus."""
    rows = []
    order: tuple[Mode, ...] = ("hybrid", "vector", "keyword")
    for mode in order:
        cfg = SearchConfig(
            mode=mode,
            ranking=search.ranking,
            limit=search.limit,
            chunks_per_note=search.chunks_per_note,
            heading_weight=search.heading_weight,
            content_weight=search.content_weight,
        )
        run = await corpus.evaluate(search=cfg, label=mode)
        rows.append(
            split_run(
                run,
                splits,
                f"{mode}{tag}",
                chunks=corpus.report.chunks,
                mean_chunk_tokens=corpus.report.mean_chunk_tokens,
            )
        )
    return rows


async def chunkers(
    data: Dataset,
    splits: dict[str, set[str]],
    *,
    mongo_url: str,
    embedder: Any,
    search: SearchConfig,
) -> list[SplitMetrics]:
    """The legacy fixed windows and whole-note chunks, hybrid and vector-only each."""
    rows = []
    for label, overrides in CHUNKERS:
        async with open_corpus(
            data,
            mongo_url=mongo_url,
            settings_overrides={**BASE_OVERRIDES, **overrides},
            embedder=embedder,
        ) as corpus:
            for mode in ("hybrid", "vector"):
                cfg = SearchConfig(mode=mode, ranking=search.ranking)
                run = await corpus.evaluate(search=cfg)
                rows.append(
                    split_run(
                        run,
                        splits,
                        f"{label}, {mode}",
                        chunks=corpus.report.chunks,
                        mean_chunk_tokens=corpus.report.mean_chunk_tokens,
                    )
                )
    return rows


async def baselines(
    data: Dataset, splits: dict[str, set[str]], *, mongo_url: str, embedder: Any
) -> list[SplitMetrics]:
    """The original design's note-level embeddings (two readings) and the CHUNKING_ENABLED=false
    rollback (term-frequency note ranking in the retrieval service)."""
    rows = []
    for how in ("truncated", "mean_of_parts"):
        run = await evaluate_note_level(data, embedder, how=how)
        rows.append(
            split_run(run, splits, f"note-level embedding ({how.replace('_', ' ')})", chunks=60)
        )
    async with open_corpus(
        data,
        mongo_url=mongo_url,
        settings_overrides={**BASE_OVERRIDES, "chunking_enabled": False},
        embedder=embedder,
    ) as corpus:
        run = await corpus.evaluate()
        rows.append(split_run(run, splits, "CHUNKING_ENABLED=false rollback (term frequency)"))
    return rows


async def sizes(
    data: Dataset,
    splits: dict[str, set[str]],
    *,
    mongo_url: str,
    embedder: Any,
    search: SearchConfig,
    chosen: Sequence[int] = SIZES,
) -> tuple[list[SplitMetrics], dict[str, dict[str, tuple[float, float, float]]]]:
    """Our chunker at several `max_chunk_tokens` (hybrid), via the optimize script's sweep;
    also each distinct size minus the default size, paired, per split."""
    results = await sweep_chunk_sizes(
        data,
        list(chosen),
        mongo_url=mongo_url,
        search=search,
        base_overrides=BASE_OVERRIDES,
        embedder=embedder,
    )
    rows = [
        split_run(
            r.outcomes,
            splits,
            f"{r.size}" + (f" (same chunks as {r.same_as})" if r.same_as else ""),
            chunks=r.chunks,
            mean_chunk_tokens=r.mean_chunk_tokens,
        )
        for r in results
    ]
    default = BASE_OVERRIDES["chunking_max_tokens"]
    ref = next((r for r in results if r.size == default), None)
    gains: dict[str, dict[str, tuple[float, float, float]]] = {}
    if ref is not None:
        for r in results:
            if r.same_as is None and r.outcomes != ref.outcomes:
                for split, ids in splits.items():
                    g = paired_gain(r.outcomes, ref.outcomes, ids)
                    gains[f"{r.size} − {default} ({split})"] = g
    return rows, gains
