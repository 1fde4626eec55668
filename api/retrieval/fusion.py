"""Reciprocal rank fusion (RRF) of ranked lists.

RRF (Cormack, Clarke & Büttcher, SIGIR 2009) scores an item by summing, over every list that
contains it, `weight / (k + rank)` with 1-based ranks. It needs no score calibration, which
is why it fuses cosine similarities and BM25 scores (different scales, different
distributions) well; `k = 60` is the paper's constant and what MongoDB `$rankFusion` uses.

Pure functions. Search modes (`hybrid`, `vector`, `keyword`) are the caller's business: pass
the lists the mode needs; a single list fuses to its own order.

Ties are broken deterministically: higher fused score, then better (smaller) best rank in any
list, then more lists containing the item, then the order of the lists as given (an item of
an earlier list first), then the item key.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from api.retrieval.types import ChunkData, ChunkHit

DEFAULT_RRF_K = 60

K = TypeVar("K", bound=Hashable)


@dataclass(slots=True, frozen=True)
class Fused(Generic[K]):
    """One fused item: its key, fused score and 1-based rank in each list containing it."""

    key: K
    score: float
    ranks: dict[str, int]


def reciprocal_rank_fusion(
    ranked_lists: Mapping[str, Sequence[K]],
    *,
    k: float = DEFAULT_RRF_K,
    weights: Mapping[str, float] | None = None,
) -> list[Fused[K]]:
    """Fuse `ranked_lists` (list name → keys, best first) into one ranking, best first.

    An item repeated within one list counts once, at its best rank. `weights` maps list
    names to non-negative multipliers (missing names weigh 1.0). Raises `ValueError` on a
    negative `k` or weight, or on a weight for a list that was not given.
    """
    if k < 0:
        raise ValueError("k must be >= 0")
    weights = dict(weights or {})
    unknown = set(weights) - set(ranked_lists)
    if unknown:
        raise ValueError(f"weights given for unknown lists: {sorted(unknown)}")
    if any(w < 0 for w in weights.values()):
        raise ValueError("weights must be >= 0")

    scores: dict[K, float] = {}
    ranks: dict[K, dict[str, int]] = {}
    first_seen: dict[K, tuple[int, int]] = {}
    for list_pos, (name, keys) in enumerate(ranked_lists.items()):
        weight = weights.get(name, 1.0)
        rank = 0
        for key in keys:
            item_ranks = ranks.setdefault(key, {})
            if name in item_ranks:
                continue  # duplicate within one list: its best (first) rank already counted
            rank += 1
            item_ranks[name] = rank
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
            first_seen.setdefault(key, (list_pos, rank))

    def order(key: K) -> tuple[float, int, int, tuple[int, int], str]:
        item_ranks = ranks[key]
        return (-scores[key], min(item_ranks.values()), -len(item_ranks), first_seen[key], str(key))

    return [Fused(key, scores[key], ranks[key]) for key in sorted(scores, key=order)]


def fuse_chunk_lists(
    results: Mapping[str, Sequence[tuple[ChunkData, float]]],
    *,
    k: float = DEFAULT_RRF_K,
    weights: Mapping[str, float] | None = None,
    limit: int | None = None,
    key: Callable[[ChunkData], Hashable] = lambda chunk: chunk.chunk_id,
) -> list[ChunkHit]:
    """Fuse retrievers' `(chunk, raw score)` lists (best first) into `ChunkHit`s.

    Each hit's `score` is its RRF score; `ranks` and `retriever_scores` record what each
    retriever said. Chunks are identified by `key` (chunk id by default); the chunk object
    of the first list that returned it is kept. `limit` truncates the fused list.
    """
    chunks: dict[Hashable, ChunkData] = {}
    raw: dict[Hashable, dict[str, float]] = {}
    keyed_lists: dict[str, list[Hashable]] = {}
    for name, items in results.items():
        keys: list[Hashable] = []
        for chunk, score in items:
            ck = key(chunk)
            chunks.setdefault(ck, chunk)
            raw.setdefault(ck, {}).setdefault(name, float(score))
            keys.append(ck)
        keyed_lists[name] = keys
    fused = reciprocal_rank_fusion(keyed_lists, k=k, weights=weights)
    if limit is not None:
        fused = fused[: max(limit, 0)]
    return [
        ChunkHit.from_chunk(chunks[f.key], f.score, ranks=f.ranks, retriever_scores=raw[f.key])
        for f in fused
    ]
