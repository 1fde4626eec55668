"""What the migration's dry run reads: which embeddings could be reused (hashes only — the
dry run must not pull kilobytes of vectors per chunk just to count them). The queries
themselves live with their collections (`ChunksRepository`, `EmbeddingCacheRepository`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from api.chunk_store.cache import EmbeddingCacheRepository
from api.chunk_store.repository import ChunksRepository

# What the dry run needs to chunk a note and explain why it was selected.
ESTIMATE_PROJECTION = {
    "title": 1,
    "content_md": 1,
    "author_id": 1,
    "version": 1,
    "index_status": 1,
    "indexed_version": 1,
    "chunk_count": 1,
    "chunking_version": 1,
    "embedding_model": 1,
    "index_attempts": 1,
    "lease_expires_at": 1,
}


class ReuseLookup:
    """Which content hashes already have a vector for a model."""

    def __init__(self, db: AsyncDatabase) -> None:
        self._chunks = ChunksRepository(db)
        self._cache = EmbeddingCacheRepository(db)

    async def chunk_hashes(
        self, authors: Iterable[Any], model: str, hashes: list[str]
    ) -> set[tuple[Any, str]]:
        """(author_id, content_hash) pairs with a stored chunk vector from `model`; the
        reconciler reuses vectors across an author's notes, never across authors."""
        return await self._chunks.hashes_with_vectors(authors, model, hashes)

    async def cached_hashes(
        self, authors: Iterable[Any], model: str, hashes: list[str]
    ) -> set[tuple[Any, str]]:
        """(author_id, content_hash) pairs in the embedding cache for `model` (it is
        scoped by author too)."""
        return await self._cache.present_hashes(authors, model, hashes)
