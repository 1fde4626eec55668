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


# A version of one generation: (generation, note_version).
Pinned = tuple[str, int]


def _not_pinned(keep: Pinned | None) -> dict[str, Any]:
    """A filter sparing the chunks of `keep` (the version an older generation's readers
    are still served), or nothing."""
    if keep is None:
        return {}
    return {"$nor": [{"generation": keep[0], "note_version": keep[1]}]}


class ChunksRepository:
    """Chunk documents. A note's searchable chunks are those of its `generation` with
    `note_version == notes.indexed_version`, plus, while a new generation is built, the
    version its `served` field names for readers of the older one; other versions are in
    flight or leftovers."""

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
        self,
        note_id: ObjectId,
        version: int,
        *,
        generation: str | None = None,
        with_vectors: bool = False,
    ) -> list[dict[str, Any]]:
        """The chunks of one version of a note (of one generation, if given), in order."""
        projection = None if with_vectors else NO_VECTOR
        query: dict[str, Any] = {"note_id": note_id, "note_version": version}
        if generation is not None:
            query["generation"] = generation
        cursor = self.collection.find(query, projection).sort("chunk_index", 1)
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
        self,
        note_id: ObjectId,
        version: int,
        session: AsyncClientSession | None = None,
        *,
        generation: str | None = None,
    ) -> int:
        """The chunks of `version` (of `generation` only, if given)."""
        query: dict[str, Any] = {"note_id": note_id, "note_version": version}
        if generation is not None:
            query["generation"] = generation
        result = await self.collection.delete_many(query, session=session)
        return result.deleted_count

    async def delete_ids(self, chunk_ids: list[Any]) -> int:
        """Exactly these chunk documents (what a run read), never any written since."""
        if not chunk_ids:
            return 0
        result = await self.collection.delete_many({"_id": {"$in": chunk_ids}})
        return result.deleted_count

    async def delete_older_versions(
        self, note_id: ObjectId, version: int, keep: Pinned | None = None
    ) -> int:
        """Chunks of versions before `version`, of any generation (never an in-flight newer
        one), except those of `keep`."""
        result = await self.collection.delete_many(
            {"note_id": note_id, "note_version": {"$lt": version}, **_not_pinned(keep)}
        )
        return result.deleted_count

    async def delete_other_generations(
        self, note_id: ObjectId, generation: str, version: int, keep: Pinned | None = None
    ) -> int:
        """Chunks of generations other than `generation` up to `version` (the indexed one),
        except those of `keep`: replaced, or left by a run that never committed. Never a
        newer version, which a run may be writing."""
        result = await self.collection.delete_many(
            {
                "note_id": note_id,
                "generation": {"$ne": generation},
                "note_version": {"$lte": version},
                **_not_pinned(keep),
            }
        )
        return result.deleted_count

    async def delete_uncommitted(
        self,
        note_id: ObjectId,
        before: int,
        indexed: int | None,
        keep: Pinned | None = None,
    ) -> int:
        """Chunks of versions before `before` other than `indexed` and `keep`: written by
        runs that never committed (no run writes an older version than the note's)."""
        result = await self.collection.delete_many(
            {
                "note_id": note_id,
                "note_version": {"$lt": before, "$ne": indexed},
                **_not_pinned(keep),
            }
        )
        return result.deleted_count

    async def set_note_fields(
        self, note_id: ObjectId, version: int, tags: list[str], updated_at: datetime
    ) -> int:
        """Refresh the note fields a version's chunks copy (`tags`, `note_updated_at`), in
        every generation that holds it."""
        result = await self.collection.update_many(
            {"note_id": note_id, "note_version": version},
            {"$set": {"tags": tags, "note_updated_at": updated_at}},
        )
        return result.modified_count

    async def iter_versions(
        self, wanted: list[tuple[ObjectId, str, int]], *, with_vectors: bool = True
    ) -> AsyncIterator[dict[str, Any]]:
        """Chunks of the given (note, generation, version) triples, for loading a search
        index. One `$in` on `note_id`, the rest checked here: the embedded server answers an
        `$or` of pairs with a collection scan (tests/retrieval/test_updated_after_scale.py
        loads 10 050 notes)."""
        if not wanted:
            return
        keys = set(wanted)
        query = {"note_id": {"$in": sorted({n for n, _, _ in wanted})}}
        projection = None if with_vectors else NO_VECTOR
        async for doc in self.collection.find(query, projection).sort(
            [("note_id", 1), ("chunk_index", 1)]
        ):
            if (doc["note_id"], doc.get("generation"), doc["note_version"]) in keys:
                yield doc

    async def iter_other_generations(
        self, author_id: Any, generation: str, batch: int = 100
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """The author's chunks of generations other than `generation`, with their vectors,
        `batch` notes at a time: the notes from one range pair of the `generation_author`
        index, then their chunks by the unique index (a limit alone would not bound what
        the embedded server reads)."""
        query = {"generation": {"$ne": generation}, "author_id": author_id}
        note_ids = await self.collection.distinct("note_id", query)
        for start in range(0, len(note_ids), batch):
            part = note_ids[start : start + batch]
            docs = await self.collection.find(
                {"note_id": {"$in": part}, "generation": {"$ne": generation}}
            ).to_list()
            yield [d for d in docs if d.get("author_id") == author_id]

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

    async def generations(self) -> list[Any]:
        """The generations chunks are of (the `generation_author` index)."""
        return await self.collection.distinct("generation")

    async def tokens_by_author(self, generation: str) -> dict[Any, dict[str, int]]:
        """Per author, the chunks of generations other than `generation` and their tokens
        (what re-indexing them into `generation` embeds at most)."""
        groups = await self.collection.aggregate(
            [
                {"$match": {"generation": {"$ne": generation}}},
                {
                    "$group": {
                        "_id": "$author_id",
                        "chunks": {"$sum": 1},
                        "tokens": {"$sum": {"$ifNull": ["$token_count", 0]}},
                    }
                },
            ]
        )
        return {g["_id"]: {"chunks": g["chunks"], "tokens": g["tokens"]} async for g in groups}

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
