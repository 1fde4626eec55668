"""All queries on the `embedding_cache` collection: vectors keyed by (author, model,
content_hash).

Filled on eviction — when chunks leave `note_chunks` (an edit replaced them, the note was
trashed) their vectors move here — so each vector is stored once, and undoing an edit or
restoring a note re-embeds nothing. Entries expire after `ttl_days` (TTL index).

Scoped by author, like the reuse of live chunks' vectors: a cache shared by all users
would let anyone confirm a guess of another user's (even deleted) text, since a reused
vector shows in `last_index_stats` and in how fast a note becomes searchable.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from pymongo import UpdateOne
from pymongo.asynchronous.database import AsyncDatabase


class EmbeddingCacheRepository:
    def __init__(self, db: AsyncDatabase) -> None:
        self.collection = db.embedding_cache

    async def get_many(self, author_id: Any, model: str, hashes: list[str]) -> dict[str, Any]:
        """{content_hash: stored vector} for the author's hashes present."""
        if not hashes:
            return {}
        cursor = self.collection.find(
            {"author_id": author_id, "model": model, "content_hash": {"$in": hashes}},
            {"content_hash": 1, "vector": 1, "_id": 0},
        )
        return {doc["content_hash"]: doc["vector"] async for doc in cursor}

    async def put_many(self, author_id: Any, model: str, vectors: dict[str, Any]) -> None:
        """Upsert the author's `{content_hash: vector}`; refreshes `cached_at` (the TTL
        clock)."""
        if not vectors:
            return
        now = datetime.now(UTC)
        ops = [
            UpdateOne(
                {"author_id": author_id, "model": model, "content_hash": h},
                {"$set": {"vector": v, "cached_at": now}},
                upsert=True,
            )
            for h, v in vectors.items()
        ]
        await self.collection.bulk_write(ops, ordered=False)

    async def count(self) -> int:
        return await self.collection.count_documents({})

    async def present_hashes(
        self, authors: Iterable[Any], model: str, hashes: list[str]
    ) -> set[tuple[Any, str]]:
        """(author_id, content_hash) pairs cached for `model` (no vectors transferred)."""
        if not hashes:
            return set()
        cursor = self.collection.find(
            {
                "author_id": {"$in": list(set(authors))},
                "model": model,
                "content_hash": {"$in": hashes},
            },
            {"author_id": 1, "content_hash": 1, "_id": 0},
        )
        return {(doc["author_id"], doc["content_hash"]) async for doc in cursor}
