"""All queries on the `note_chunks` collection."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from datetime import datetime
from typing import Any

from bson import ObjectId
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase

# Everything but the vector: what the chunk listing API and the keyword side need.
NO_VECTOR = {"embedding": 0}


class ChunksRepository:
    """Chunk documents. A note's searchable chunks are those with
    `note_version == notes.indexed_version`; other versions are in flight or leftovers."""

    def __init__(self, db: AsyncDatabase) -> None:
        self.collection = db.note_chunks

    async def delete_for_note(
        self, note_id: ObjectId, session: AsyncClientSession | None = None
    ) -> int:
        result = await self.collection.delete_many({"note_id": note_id}, session=session)
        return result.deleted_count

    async def for_note(self, note_id: ObjectId, *, with_vectors: bool) -> list[dict[str, Any]]:
        """Every chunk of the note, all versions, in (version, index) order."""
        projection = None if with_vectors else NO_VECTOR
        cursor = self.collection.find({"note_id": note_id}, projection).sort(
            [("note_version", 1), ("chunk_index", 1)]
        )
        return await cursor.to_list()

    async def for_version(
        self, note_id: ObjectId, version: int, *, with_vectors: bool = False
    ) -> list[dict[str, Any]]:
        """The chunks of one version of a note, in order."""
        projection = None if with_vectors else NO_VECTOR
        cursor = self.collection.find(
            {"note_id": note_id, "note_version": version}, projection
        ).sort("chunk_index", 1)
        return await cursor.to_list()

    async def vectors_by_hash(
        self, author_id: ObjectId, model: str, hashes: list[str]
    ) -> dict[str, Any]:
        """Stored vectors of the author's chunks whose embedded text has one of `hashes`
        (the same text embedded by the same model: reusable, e.g. a duplicated note)."""
        if not hashes:
            return {}
        cursor = self.collection.find(
            {"author_id": author_id, "embedding_model": model, "content_hash": {"$in": hashes}},
            {"content_hash": 1, "embedding": 1, "_id": 0},
        )
        return {doc["content_hash"]: doc["embedding"] async for doc in cursor}

    async def insert_version(
        self, docs: list[dict[str, Any]], session: AsyncClientSession | None = None
    ) -> None:
        if docs:
            await self.collection.insert_many(docs, ordered=True, session=session)

    async def delete_version(
        self, note_id: ObjectId, version: int, session: AsyncClientSession | None = None
    ) -> int:
        result = await self.collection.delete_many(
            {"note_id": note_id, "note_version": version}, session=session
        )
        return result.deleted_count

    async def delete_ids(self, chunk_ids: list[Any]) -> int:
        """Exactly these chunk documents (what a run read), never any written since."""
        if not chunk_ids:
            return 0
        result = await self.collection.delete_many({"_id": {"$in": chunk_ids}})
        return result.deleted_count

    async def delete_older_versions(self, note_id: ObjectId, version: int) -> int:
        """Chunks of versions before `version` (never an in-flight newer one)."""
        result = await self.collection.delete_many(
            {"note_id": note_id, "note_version": {"$lt": version}}
        )
        return result.deleted_count

    async def delete_uncommitted(self, note_id: ObjectId, before: int, indexed: int | None) -> int:
        """Chunks of versions before `before` other than `indexed`: written by runs that
        never committed (no run writes an older version than the note's)."""
        result = await self.collection.delete_many(
            {"note_id": note_id, "note_version": {"$lt": before, "$ne": indexed}}
        )
        return result.deleted_count

    async def set_note_fields(
        self, note_id: ObjectId, version: int, tags: list[str], updated_at: datetime
    ) -> int:
        """Refresh the note fields a version's chunks copy (`tags`, `note_updated_at`)."""
        result = await self.collection.update_many(
            {"note_id": note_id, "note_version": version},
            {"$set": {"tags": tags, "note_updated_at": updated_at}},
        )
        return result.modified_count

    async def iter_versions(
        self, pairs: list[tuple[ObjectId, int]], *, with_vectors: bool = True
    ) -> AsyncIterator[dict[str, Any]]:
        """Chunks of the given (note, version) pairs, for loading a search index. One `$in`
        on `note_id`, the version checked here: the embedded server answers an `$or` of
        pairs with a collection scan (tests/retrieval/test_updated_after_scale.py loads
        10 050 notes)."""
        if not pairs:
            return
        wanted = set(pairs)
        query = {"note_id": {"$in": sorted({n for n, _ in pairs})}}
        projection = None if with_vectors else NO_VECTOR
        async for doc in self.collection.find(query, projection).sort(
            [("note_id", 1), ("chunk_index", 1)]
        ):
            if (doc["note_id"], doc["note_version"]) in wanted:
                yield doc

    async def notes_missing_updated_at(self, limit: int) -> list[ObjectId]:
        """Up to `limit` notes with chunks written before chunks carried `note_updated_at`."""
        groups = await self.collection.aggregate(
            [
                {"$match": {"note_updated_at": {"$exists": False}}},
                {"$group": {"_id": "$note_id"}},
                {"$limit": limit},
            ]
        )
        return [g["_id"] async for g in groups]

    async def fill_note_updated_at(self, note_id: ObjectId, updated_at: datetime | None) -> int:
        """Set `note_updated_at` on the note's chunks that lack it."""
        result = await self.collection.update_many(
            {"note_id": note_id, "note_updated_at": {"$exists": False}},
            {"$set": {"note_updated_at": updated_at}},
        )
        return result.modified_count

    async def note_ids_with_chunks(self) -> list[ObjectId]:
        return await self.collection.distinct("note_id")

    async def delete_for_notes(self, note_ids: list[ObjectId]) -> int:
        if not note_ids:
            return 0
        result = await self.collection.delete_many({"note_id": {"$in": note_ids}})
        return result.deleted_count

    async def hashes_with_vectors(
        self, authors: Iterable[Any], model: str, hashes: list[str]
    ) -> set[tuple[Any, str]]:
        """(author_id, content_hash) pairs of the authors' chunks embedded by `model` (hashes
        only, no vectors: for estimating how much an indexing run can reuse)."""
        if not hashes:
            return set()
        cursor = self.collection.find(
            {
                "author_id": {"$in": list(set(authors))},
                "embedding_model": model,
                "content_hash": {"$in": hashes},
            },
            {"author_id": 1, "content_hash": 1, "_id": 0},
        )
        return {(doc["author_id"], doc["content_hash"]) async for doc in cursor}
