"""Index generations: which chunker and embedding model made a chunk, and which generation
each user's search reads (the `search_generations` collection).

A *generation* is the pair (chunking_version, embedding model key); its short hash is the
`generation` field of every chunk and of every indexed note. A change of model or chunker
starts a new generation, built beside the old one; each user's search keeps reading the
generation in their record until the new one is complete for them, then switches
(docs/decisions/0008-blue-green-reindexing.md).

`search_generations` holds one document per user whose search reads, or read, another
generation than the configured one: `{_id: author_id, generation, embedding_model,
chunking_version, switch: {...progress...}, cleanup}`. A user without one reads the
configured generation.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from pymongo import ASCENDING, IndexModel, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase

GENERATION_CHARS = 12


def generation_of(chunking_version: Any, model_key: Any) -> str:
    """The generation of chunks made by this chunker and model: a 12-hex-digit hash
    (stable across processes and releases; missing values hash as empty strings)."""
    text = f"{chunking_version or ''}\x00{model_key or ''}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:GENERATION_CHARS]


SEARCH_GENERATIONS_INDEXES = [
    # Every process polls for users who switched since its last look.
    IndexModel([("switched_at", ASCENDING)], name="switched_at", sparse=True),
    IndexModel([("cleanup", ASCENDING)], name="cleanup", sparse=True),
]


class ServingRecords:
    """Queries on `search_generations`: one small document per user that reads (or read)
    another generation than the configured one."""

    def __init__(self, db: AsyncDatabase) -> None:
        self.collection = db.search_generations

    async def all(self) -> list[dict[str, Any]]:
        """Every record (one per such user: a small collection)."""
        return await self.collection.find({}).to_list()

    async def get(self, author_id: Any) -> dict[str, Any] | None:
        return await self.collection.find_one({"_id": author_id})

    async def ensure(self, author_id: Any, serving: dict[str, Any]) -> None:
        """Create the user's record reading `serving` ({generation, embedding_model,
        chunking_version}) unless one exists (a record is never overwritten here: the
        first process to start after a change decides, before any run commits)."""
        await self.collection.update_one(
            {"_id": author_id},
            {"$setOnInsert": {**serving, "created_at": datetime.now(UTC)}},
            upsert=True,
        )

    async def start_switch(self, author_id: Any, switch: dict[str, Any]) -> None:
        """Record the progress counters of a switch to `switch["target"]`, unless this very
        switch is already recorded (a restart resumes it)."""
        await self.collection.update_one(
            {"_id": author_id, "switch.target": {"$ne": switch["target"]}},
            {"$set": {"switch": switch}},
        )

    async def add_progress(
        self, author_id: Any, target: str, *, notes: int, tokens: int, estimate: int
    ) -> None:
        """Count one note re-indexed into `target`: tokens embedded, and the estimate's
        tokens it accounts for."""
        await self.collection.update_one(
            {"_id": author_id, "switch.target": target},
            {
                "$inc": {
                    "switch.notes_done": notes,
                    "switch.tokens_embedded": tokens,
                    "switch.estimate_done": estimate,
                }
            },
        )

    async def switch(self, author_id: Any, source: str, target: dict[str, Any]) -> bool:
        """Atomically move the user's search from generation `source` to `target`
        ({generation, embedding_model, chunking_version}), flagging the old generation's
        chunks for clean-up. False when the record had moved already."""
        now = datetime.now(UTC)
        done = await self.collection.find_one_and_update(
            {"_id": author_id, "generation": source},
            {
                "$set": {
                    **target,
                    "previous": source,
                    "switched_at": now,
                    "cleanup": True,
                    "switch.finished_at": now,
                }
            },
            return_document=ReturnDocument.AFTER,
        )
        return done is not None

    async def switched_since(self, since: datetime | None) -> list[dict[str, Any]]:
        """Records whose user switched at or after `since` (all switched ones for None)."""
        query: dict[str, Any] = (
            {"switched_at": {"$gte": since}} if since else {"switched_at": {"$ne": None}}
        )
        return await self.collection.find(query).sort("switched_at", 1).to_list()

    async def cleanups(self, limit: int = 100) -> list[dict[str, Any]]:
        """Users whose old generation's chunks may not have been dropped yet."""
        return await self.collection.find({"cleanup": True}).limit(limit).to_list()

    async def clear_cleanup(self, author_id: Any, generation: str) -> None:
        await self.collection.update_one(
            {"_id": author_id, "generation": generation}, {"$unset": {"cleanup": ""}}
        )


MISSING = {"generation": None}  # written before generations existed


async def backfill_generations(db: AsyncDatabase, batch: int = 200) -> tuple[int, int]:
    """Give every chunk and every indexed note written before generations existed its
    `generation`: a chunk's from its note's `chunking_version` and its own
    `embedding_model`, a note's from its two index fields. Idempotent, and cheap once done
    (one bounded look-up per collection on the `generation` indexes). Each write covers
    `batch` notes: one statement over a large legacy collection outlasts the socket
    timeout on the embedded server (tests/retrieval/test_updated_after_scale.py). Returns
    (chunks, notes) updated."""
    chunks = notes = 0
    while note_ids := await db.note_chunks.distinct("note_id", MISSING):
        for start in range(0, len(note_ids), batch):
            chunks += await _backfill_chunks(db, note_ids[start : start + batch])
    while pending := await db.notes.find(
        {**MISSING, "indexed_version": {"$ne": None}},
        {"chunking_version": 1, "embedding_model": 1},
    ).to_list():
        by_pair: dict[str, list[Any]] = {}
        for note in pending:
            key = generation_of(note.get("chunking_version"), note.get("embedding_model"))
            by_pair.setdefault(key, []).append(note["_id"])
        for generation, ids in by_pair.items():
            for start in range(0, len(ids), batch * 5):
                part = ids[start : start + batch * 5]
                result = await db.notes.update_many(
                    {"_id": {"$in": part}, **MISSING}, {"$set": {"generation": generation}}
                )
                notes += result.modified_count
    return chunks, notes


async def _backfill_chunks(db: AsyncDatabase, note_ids: list[Any]) -> int:
    """The generation of these notes' chunks that have none; returns how many."""
    versions = {
        doc["_id"]: doc.get("chunking_version")
        async for doc in db.notes.find({"_id": {"$in": note_ids}}, {"chunking_version": 1})
    }
    models = await db.note_chunks.distinct(
        "embedding_model", {"note_id": {"$in": note_ids}, **MISSING}
    )
    by_version: dict[Any, list[Any]] = {}
    for note_id in note_ids:
        by_version.setdefault(versions.get(note_id), []).append(note_id)
    updated = 0
    for chunking_version, ids in by_version.items():
        for model in [m for m in models if isinstance(m, str)]:
            result = await db.note_chunks.update_many(
                {"note_id": {"$in": ids}, "embedding_model": model, **MISSING},
                {"$set": {"generation": generation_of(chunking_version, model)}},
            )
            updated += result.modified_count
        # No model (or not a string): still one generation, so the outer loop ends.
        result = await db.note_chunks.update_many(
            {"note_id": {"$in": ids}, **MISSING},
            {"$set": {"generation": generation_of(chunking_version, None)}},
        )
        updated += result.modified_count
    return updated
