"""All queries on the `embedding_cache` collection: vectors keyed by (model, content_hash).

Filled on eviction — when chunks leave `note_chunks` (an edit replaced them, the note was
trashed) their vectors move here — so each vector is stored once, and undoing an edit or
restoring a note re-embeds nothing. Entries expire after `ttl_days` (TTL index)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pymongo import UpdateOne
from pymongo.asynchronous.database import AsyncDatabase


class EmbeddingCacheRepository:
    def __init__(self, db: AsyncDatabase) -> None:
        self.collection = db.embedding_cache

    async def get_many(self, model: str, hashes: list[str]) -> dict[str, Any]:
        """{content_hash: stored vector} for the hashes present."""
        if not hashes:
            return {}
        cursor = self.collection.find(
            {"model": model, "content_hash": {"$in": hashes}},
            {"content_hash": 1, "vector": 1, "_id": 0},
        )
        return {doc["content_hash"]: doc["vector"] async for doc in cursor}

    async def put_many(self, model: str, vectors: dict[str, Any]) -> None:
        """Upsert `{content_hash: vector}`; refreshes `cached_at` (the TTL clock)."""
        if not vectors:
            return
        now = datetime.now(UTC)
        ops = [
            UpdateOne(
                {"model": model, "content_hash": h},
                {"$set": {"vector": v, "cached_at": now}},
                upsert=True,
            )
            for h, v in vectors.items()
        ]
        await self.collection.bulk_write(ops, ordered=False)

    async def count(self) -> int:
        return await self.collection.count_documents({})

    async def present_hashes(self, model: str, hashes: list[str]) -> set[str]:
        """Which of `hashes` have a cached vector for `model` (no vectors transferred)."""
        if not hashes:
            return set()
        cursor = self.collection.find(
            {"model": model, "content_hash": {"$in": hashes}}, {"content_hash": 1, "_id": 0}
        )
        return {doc["content_hash"] async for doc in cursor}
