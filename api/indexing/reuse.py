"""Embeddings a run can reuse instead of paying for: by `content_hash`, from the note's own
chunks, the author's embedding cache and the author's other chunks (never another user's:
a reused vector shows in stats and timing). Vectors that leave `note_chunks` go to the cache.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from api.chunk_store.cache import EmbeddingCacheRepository
from api.chunk_store.repository import ChunksRepository
from api.chunk_store.vectors import to_bson_vector
from api.indexing.types import Progress
from connectors.embeddings.base import EmbeddingError


class TurnOver(Exception):
    """A long embedding handed its worker to another user's due note: what it embedded so
    far is in the author's embedding cache, so the note's next run resumes from there.
    `progress` is that work, for the note's stats."""

    def __init__(self, embedded: int, tokens: int, ms: float) -> None:
        super().__init__(f"handed over after embedding {embedded} texts")
        self.progress = Progress(embedded=embedded, tokens=tokens, ms=round(ms, 2))


# Whether a run that has embedded since a `time.monotonic()` reading should hand over.
TurnOverCheck = Callable[[float], Awaitable[bool]]


async def vectors_for(
    note: dict[str, Any],
    chunks: list[Any],
    existing: list[dict[str, Any]],
    *,
    embedder: Any,
    model_key: str,
    cache: EmbeddingCacheRepository,
    stored: ChunksRepository,
    turn_over: TurnOverCheck | None = None,
) -> tuple[dict[str, Any], int, int]:
    """({content_hash: BSON vector} for every chunk, texts embedded, tokens embedded),
    embedding only texts seen nowhere.

    An embedder with a `slice_texts` (the local model, bound by this machine's CPU) gets
    them in slices of that many, shortest first; after each slice `turn_over(when the
    embedding started)` may ask to hand the worker over (another user's note is waiting):
    the slices done go to the cache and `TurnOver` is raised. Others get one call (OpenAI:
    batched, concurrent requests)."""
    found, missing = await _known_vectors(
        note["author_id"], chunks, existing, model_key, cache, stored
    )
    if not missing:
        return found, 0, 0
    texts = {c.content_hash: c.embedding_text for c in chunks if c.content_hash in missing}
    order = list(texts)
    size = getattr(embedder, "slice_texts", None) if turn_over is not None else None
    if size:
        order.sort(key=lambda h: len(texts[h]))  # similar lengths in a slice: less padding
    slices = _Slices(embedder, note["author_id"], model_key, cache, turn_over)
    fresh, tokens = await slices.embed(texts, order, size or len(order))
    found.update(fresh)
    return found, len(order), tokens


async def _known_vectors(
    author_id: Any,
    chunks: list[Any],
    existing: list[dict[str, Any]],
    model_key: str,
    cache: EmbeddingCacheRepository,
    stored: ChunksRepository,
) -> tuple[dict[str, Any], list[str]]:
    """The vectors already made by `model_key` for the chunks' hashes (the note's own
    chunks, then the author's cache, then the author's other chunks), and the hashes seen
    nowhere, sorted."""
    found: dict[str, Any] = {
        d["content_hash"]: d["embedding"]
        for d in existing
        if d.get("embedding_model") == model_key and d.get("embedding") is not None
    }
    missing = sorted({c.content_hash for c in chunks} - found.keys())
    for lookup in (cache.get_many, stored.vectors_by_hash):
        if not missing:
            break
        found.update(await lookup(author_id, model_key, missing))
        missing = [h for h in missing if h not in found]
    return found, missing


class _Slices:
    """Embeds texts slice by slice, asking `turn_over` after each slice but the last."""

    def __init__(
        self,
        embedder: Any,
        author_id: Any,
        model_key: str,
        cache: EmbeddingCacheRepository,
        turn_over: TurnOverCheck | None,
    ) -> None:
        self.embedder, self.author_id, self.model_key = embedder, author_id, model_key
        self.cache, self.turn_over = cache, turn_over

    async def embed(
        self, texts: dict[str, str], order: list[str], size: int
    ) -> tuple[dict[str, Any], int]:
        """({content_hash: BSON vector}, tokens embedded) for `order`, `size` at a time."""
        fresh: dict[str, Any] = {}
        tokens = 0
        started = time.monotonic()
        for start in range(0, len(order), size):
            part = order[start : start + size]
            tokens += await self._embed_slice(texts, part, fresh)
            if start + size < len(order) and await self._hand_over(started):
                await self.cache.put_many(self.author_id, self.model_key, fresh)
                raise TurnOver(len(fresh), tokens, (time.monotonic() - started) * 1000)
        return fresh, tokens

    async def _embed_slice(
        self, texts: dict[str, str], part: list[str], into: dict[str, Any]
    ) -> int:
        batch = await self.embedder.embed([texts[h] for h in part])
        vecs = np.asarray(batch.vectors, dtype=np.float32)
        if vecs.shape != (len(part), self.embedder.dimensions):
            raise EmbeddingError(f"embedder returned shape {vecs.shape}", retryable=True)
        into.update((h, to_bson_vector(vec)) for h, vec in zip(part, vecs, strict=True))
        return int(batch.tokens)

    async def _hand_over(self, started: float) -> bool:
        return self.turn_over is not None and await self.turn_over(started)


async def cache_evicted(
    cache: EmbeddingCacheRepository, docs: list[dict[str, Any]], keep: set[str]
) -> None:
    """Put the vectors of `docs` whose hash is not in `keep` into their author's cache."""
    by_key: dict[tuple[Any, str], dict[str, Any]] = {}
    for d in docs:
        if d.get("embedding") is not None and d["content_hash"] not in keep:
            key = (d.get("author_id"), d.get("embedding_model", ""))
            by_key.setdefault(key, {})[d["content_hash"]] = d["embedding"]
    for (author_id, model), vectors in by_key.items():
        await cache.put_many(author_id, model, vectors)
