"""The checker's MongoDB reads (`notes`, `note_chunks`) and the repair's writes (re-queue
notes, delete chunks).

Everything streams: notes in `_id` order and chunks in `note_id` order through cursors with
a bounded batch size, so memory holds one batch plus one note's chunks, whatever the size of
the collections.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from datetime import datetime
from typing import Any

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from api.notes.repository import pending_fields

NOTE_FIELDS = {
    "author_id": 1,
    "status": 1,
    "version": 1,
    "content_md": 1,
    "index_status": 1,
    "index_error": 1,
    "indexed_version": 1,
    "chunk_count": 1,
    "embedding_model": 1,
    "chunking_strategy": 1,
    "chunking_version": 1,
    "generation": 1,  # of the indexed chunks
    "served": 1,  # the version kept for an older generation's readers
    "evict_pending": 1,  # set at a commit, unset once the old versions are gone
    "updated_at": 1,  # with `version`, tells the confirmation that a note moved under it
}
CHUNK_FIELDS = {
    "note_id": 1,
    "author_id": 1,
    "note_version": 1,
    "chunk_index": 1,
    "chunk_type": 1,
    "content_md": 1,
    "start_offset": 1,
    "end_offset": 1,
    "embedding": 1,
    "embedding_model": 1,
    "generation": 1,
    "metadata": 1,
}


class IntegrityQueries:
    """Reads for the scan and the confirmation pass; writes for `--repair` only."""

    def __init__(self, db: AsyncDatabase, *, batch_size: int = 200) -> None:
        self.notes = db.notes
        self.chunks = db.note_chunks
        self.batch_size = batch_size

    async def iter_notes(self) -> AsyncIterator[dict[str, Any]]:
        """Every note, in `_id` order (the primary key index: no sort in memory)."""
        cursor = self.notes.find({}, NOTE_FIELDS).sort("_id", 1).batch_size(self.batch_size)
        async for doc in cursor:
            yield doc

    async def iter_chunks(self) -> AsyncIterator[dict[str, Any]]:
        """Every chunk, in `note_id` order (served by the `note_id_1` index; within a note
        the order is the checker's business)."""
        cursor = (
            self.chunks.find({}, CHUNK_FIELDS)
            .sort("note_id", 1)
            .batch_size(self.batch_size * 5)
            .allow_disk_use(True)
        )
        async for doc in cursor:
            yield doc

    async def notes_by_id(self, note_ids: list[Any]) -> dict[Any, dict[str, Any]]:
        """Fresh copies of some notes (the confirmation pass)."""
        cursor = self.notes.find({"_id": {"$in": note_ids}}, NOTE_FIELDS)
        return {doc["_id"]: doc async for doc in cursor}

    async def chunks_of(self, note_ids: list[Any]) -> dict[Any, list[dict[str, Any]]]:
        """Fresh copies of the chunks of some notes, grouped by note."""
        grouped: dict[Any, list[dict[str, Any]]] = {n: [] for n in note_ids}
        async for doc in self.chunks.find({"note_id": {"$in": note_ids}}, CHUNK_FIELDS):
            grouped.setdefault(doc["note_id"], []).append(doc)
        return grouped

    async def has_unique_chunk_index(self) -> bool:
        """Whether the unique (note_id, generation, note_version, chunk_index) index
        exists."""
        wanted = [("note_id", 1), ("generation", 1), ("note_version", 1), ("chunk_index", 1)]
        async for index in await self.chunks.list_indexes():
            if index.get("unique") and list(index["key"].items()) == wanted:
                return True
        return False

    # ---- repair (writes) ---------------------------------------------------------------
    async def requeue_notes(self, note_ids: Iterable[ObjectId], now: datetime) -> int:
        """Put notes back on the indexing queue, due now, with a fresh attempt budget. Only
        index fields change; a note's content is never touched."""
        ids = list(note_ids)
        if not ids:
            return 0
        result = await self.notes.update_many({"_id": {"$in": ids}}, {"$set": pending_fields(now)})
        return result.modified_count

    async def delete_chunks(self, chunk_ids: Iterable[ObjectId]) -> int:
        ids = list(chunk_ids)
        if not ids:
            return 0
        result = await self.chunks.delete_many({"_id": {"$in": ids}})
        return result.deleted_count

    async def delete_chunks_of_missing_notes(self, note_ids: Iterable[Any]) -> int:
        """Delete all chunks of notes that (still) do not exist."""
        ids = list(note_ids)
        if not ids:
            return 0
        present = {doc["_id"] async for doc in self.notes.find({"_id": {"$in": ids}}, {"_id": 1})}
        gone = [n for n in ids if n not in present]
        if not gone:
            return 0
        result = await self.chunks.delete_many({"note_id": {"$in": gone}})
        return result.deleted_count
