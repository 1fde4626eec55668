"""Sweeping `max_chunk_tokens` over a labelled dataset through the real pipeline, in an
isolated database: one index and evaluation per distinct chunking (sizes whose chunks are
identical to a smaller size's are reported as equal to it). `autonote eval
optimize-chunk-size` prints the result."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from api.config import Settings
from api.evaluation.dataset import Dataset
from api.evaluation.harness import SearchConfig, default_embedder, eval_settings, open_corpus
from api.evaluation.metrics import Metrics, QuestionOutcome
from api.providers import build_chunker

DEFAULT_SIZES: tuple[int, ...] = (100, 200, 300, 400, 500, 600, 800)


@dataclass(frozen=True, slots=True)
class SizeResult:
    """One chunk size's outcome; `same_as` names the smaller size with identical chunks."""

    size: int
    chunks: int
    mean_chunk_tokens: float
    metrics: Metrics
    outcomes: tuple[QuestionOutcome, ...] = field(repr=False, default=())
    same_as: int | None = None


def _fingerprint(dataset: Dataset, chunker: Any) -> str:
    """A hash of every chunk span and breadcrumb the chunker makes for the dataset."""
    digest = hashlib.blake2b(digest_size=16)
    for note in dataset.notes.values():
        for c in chunker.chunk_note(note.content_md, note.title):
            digest.update(f"{note.id}|{c.start_offset}|{c.end_offset}|{c.section_path}\n".encode())
    return digest.hexdigest()


def size_overrides(size: int, base: Settings, strategy: str) -> dict[str, Any]:
    """Settings overrides for one size (the minimum chunk size is lowered when needed)."""
    min_tokens = base.chunking_min_tokens if base.chunking_min_tokens < size else size // 2
    return {
        "chunking_strategy": strategy,
        "chunking_max_tokens": size,
        "chunking_min_tokens": min_tokens,
    }


async def sweep_chunk_sizes(
    dataset: Dataset,
    sizes: list[int],
    *,
    mongo_url: str,
    search: SearchConfig | None = None,
    strategy: str = "hierarchical_markdown",
    base_overrides: dict[str, Any] | None = None,
    embedder: Any | None = None,
) -> list[SizeResult]:
    """Index and evaluate `dataset` once per distinct chunking among `sizes` (ascending)."""
    search = search or SearchConfig()
    base_overrides = dict(base_overrides or {})
    own = embedder is None
    probe = eval_settings(mongo_url, "probe", Path("."), base_overrides)
    embedder = embedder or default_embedder(probe)
    results: list[SizeResult] = []
    seen: dict[str, SizeResult] = {}
    try:
        for size in sorted(set(sizes)):
            overrides = {**base_overrides, **size_overrides(size, probe, strategy)}
            chunker = build_chunker(
                eval_settings(mongo_url, "probe", Path("."), overrides), embedder
            )
            key = _fingerprint(dataset, chunker)
            if key in seen:
                first = seen[key]
                results.append(
                    SizeResult(
                        size,
                        first.chunks,
                        first.mean_chunk_tokens,
                        first.metrics,
                        first.outcomes,
                        same_as=first.same_as or first.size,
                    )
                )
                continue
            async with open_corpus(
                dataset, mongo_url=mongo_url, settings_overrides=overrides, embedder=embedder
            ) as corpus:
                run = await corpus.evaluate(search=search, label=f"max_chunk_tokens={size}")
                result = SizeResult(
                    size,
                    corpus.report.chunks,
                    corpus.report.mean_chunk_tokens,
                    run.metrics,
                    run.outcomes,
                )
            seen[key] = result
            results.append(result)
    finally:
        if own:
            await embedder.aclose()
    return results


def best_size(results: list[SizeResult]) -> SizeResult:
    """Highest Recall@3, then MRR@3; ties → the smaller size."""
    return max(results, key=lambda r: (r.metrics.recall[3], r.metrics.mrr3, -r.size))
