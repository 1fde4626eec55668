"""The migration's database access: its queries on `notes` (selection, enqueueing, state
reads; the filters are built by the pure functions of `api.migration.selection`), and the
dry run's look-ups of reusable embeddings (hashes only: the dry run must not pull kilobytes
of vectors per chunk just to count them; the queries live with their collections,
`ChunksRepository` and `EmbeddingCacheRepository`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from api.chunk_store.cache import EmbeddingCacheRepository
from api.chunk_store.repository import ChunksRepository
from api.migration.selection import (
    STATE_PROJECTION,
    Selection,
    catch_up_filter,
    enqueue_filter,
    enqueue_update,
    shape_filter,
    shape_update,
)

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


class MigrationNotes:
    """Selection, enqueueing and state reads on `notes` for the migration."""

    def __init__(self, db: AsyncDatabase) -> None:
        self.collection = db.notes

    async def count(self, selection: Selection) -> int:
        """How many notes need indexing (one scan; `limit` not applied)."""
        return await self.collection.count_documents(selection.query())

    async def unaddressable(self, selection: Selection, limit: int = 1000) -> list[Any]:
        """Ids of selected notes whose `_id` is not an ObjectId (reported, not indexed)."""
        cursor = self.collection.find(selection.query(addressable=False), {"_id": 1})
        return [doc["_id"] async for doc in cursor.limit(limit)]

    async def id_range(self, selection: Selection) -> tuple[Any, Any] | None:
        """(first, last) `_id` of the selected notes, or None when nothing is selected. The
        run stops at `last`: notes created after it started are the API's to index."""
        query = selection.query()
        first = await self.collection.find_one(query, {"_id": 1}, sort=[("_id", 1)])
        if first is None:
            return None
        last = await self.collection.find_one(query, {"_id": 1}, sort=[("_id", -1)])
        return first["_id"], (last or first)["_id"]

    async def page(
        self,
        selection: Selection,
        *,
        after: Any,
        upto: Any,
        limit: int,
        projection: dict[str, Any] | None = None,
        max_chars: int | None = None,
    ) -> list[dict[str, Any]]:
        """The next `limit` selected notes in `_id` order after `after` (None: from the
        start), up to `upto` inclusive. Keyset pagination: each page is one indexed range
        scan, however large the collection. `max_chars`: the page also ends once its notes'
        `content_md` reach that many characters (at least one note)."""
        id_range: dict[str, Any] = {"$lte": upto}
        if after is not None:
            id_range["$gt"] = after
        query = {"$and": [selection.query(), {"_id": id_range}]}
        cursor = self.collection.find(query, projection or {"_id": 1}).sort("_id", 1).limit(limit)
        if max_chars is None:
            return await cursor.to_list(length=limit)
        docs: list[dict[str, Any]] = []
        chars = 0
        async with cursor:
            async for doc in cursor:
                docs.append(doc)
                content = doc.get("content_md")
                chars += len(content) if isinstance(content, str) else 0
                if chars >= max_chars:
                    break
        return docs

    async def normalize_shapes(self, selection: Selection, now: datetime, batch: int) -> int:
        """Store legacy shapes (`shape_filter`) as the API writes them, `batch` notes per
        update in `_id` order; returns how many notes changed. Title, content, tags and
        index state are never written. In batches: one update over a large collection would
        outlive the client's socket timeout."""
        legacy, update = shape_filter(selection), shape_update(now)
        changed, after = 0, None
        while True:
            query = legacy if after is None else {"$and": [legacy, {"_id": {"$gt": after}}]}
            cursor = self.collection.find(query, {"_id": 1}).sort("_id", 1).limit(batch)
            ids = [doc["_id"] async for doc in cursor]
            if not ids:
                return changed
            result = await self.collection.update_many(
                {"$and": [{"_id": {"$in": ids}}, legacy]}, update
            )
            changed += result.modified_count
            after = ids[-1]

    async def enqueue(
        self,
        ids: list[ObjectId],
        selection: Selection,
        now: datetime,
        *,
        reserve_until: datetime | None = None,
    ) -> int:
        """Put the notes that still need indexing on the queue, due now and reserved for
        the migration until `reserve_until` (see `selection.enqueue_update` for why this
        cannot lose an edit)."""
        if not ids:
            return 0
        result = await self.collection.update_many(
            enqueue_filter(ids, selection, now), enqueue_update(now, reserve_until)
        )
        return result.modified_count

    async def renew_reservations(self, ids: list[ObjectId], until: datetime) -> int:
        """Keep the run's reservations until `until`: also one that ran out (a missed
        renewal, the database away) while its note still waits, but none that a user's
        write, a completed run or the run's end cleared."""
        return await self._set_reservations(ids, until)

    async def end_reservations(self, ids: list[ObjectId]) -> int:
        """Hand the notes to any worker: due as they are, no longer reserved."""
        return await self._set_reservations(ids, None)

    async def _set_reservations(self, ids: list[ObjectId], until: datetime | None) -> int:
        """Set `reserved_until` on those of `ids` that still hold a reservation."""
        if not ids:
            return 0
        result = await self.collection.update_many(
            {"_id": {"$in": ids}, "reserved_until": {"$ne": None}},
            {"$set": {"reserved_until": until}},
        )
        return result.modified_count

    async def state(self, note_id: ObjectId) -> dict[str, Any] | None:
        """The note's queue/index fields (no content)."""
        return await self.collection.find_one({"_id": note_id}, STATE_PROJECTION)

    async def edited_since(
        self,
        selection: Selection,
        *,
        started_at: datetime,
        first_id: Any,
        last_id: Any,
        limit: int,
    ) -> list[ObjectId]:
        """Notes in the run's range re-queued by an edit after `started_at`."""
        query = catch_up_filter(
            selection, started_at=started_at, first_id=first_id, last_id=last_id
        )
        cursor = self.collection.find(query, {"_id": 1}).sort("_id", 1).limit(limit)
        return [doc["_id"] async for doc in cursor]


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
