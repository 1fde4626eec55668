"""Queries on the `notes` collection for the notes API (CRUD) and for search and chat
(`NotesSearchQueries`). The indexing queue's queries on `notes` are in
`api.indexing.queue`, the migration's in `api.migration.repository`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from bson import ObjectId
from pymongo import ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from api.db.ids import new_object_id
from api.notes.paging import Position, key_range
from api.notes.stored import LISTED_STATUS, STATUS_QUERY, note_updated_at
from api.notes.types import NoteTimes
from api.notes.versioning import NEXT_VERSION, WHOLE_VERSION

_LIST_PROJECTION = {"content_md": 0}
ACTIVE = STATUS_QUERY["active"]


def _lit(value: Any) -> dict[str, Any]:
    # User text inside an update pipeline must be literal: "$x" would be read as a field path.
    return {"$literal": value}


class KeyTaken(Exception):
    """Another note of the author already has this `external_id`."""


def pending_fields(now: datetime, status: str = "pending") -> dict[str, Any]:
    """The fields that put a note (back) on the indexing queue, due now. A write a user
    made also ends a migration's reservation of the note (`api.indexing.queue`), so any
    worker indexes it at once rather than when the migration reaches it."""
    return {
        "index_status": status,
        "next_attempt_at": now,
        "index_attempts": 0,
        "index_error": None,
        "changed_at": now,
        "reserved_until": None,
    }


class NotesRepository:
    """CRUD on notes; every query is scoped by `author_id` (another user's note is absent)."""

    def __init__(self, db: AsyncDatabase) -> None:
        self.collection = db.notes

    async def insert(self, doc: dict[str, Any]) -> dict[str, Any]:
        doc = {"_id": new_object_id(), **doc}
        await self.collection.insert_one(doc)
        return doc

    async def insert_keyed(self, doc: dict[str, Any]) -> dict[str, Any] | None:
        """Insert a note that has an `external_id`; None when the author already has a note
        with that key (the unique index decides, so two racing inserts make one note)."""
        try:
            return await self.insert(doc)
        except DuplicateKeyError:
            return None

    async def get(self, note_id: ObjectId, author_id: ObjectId) -> dict[str, Any] | None:
        return await self.collection.find_one({"_id": note_id, "author_id": author_id})

    async def get_by_external_id(self, author_id: ObjectId, key: str) -> dict[str, Any] | None:
        """The author's note with this key, trashed or not (keys are unique per author)."""
        return await self.collection.find_one({"author_id": author_id, "external_id": key})

    async def get_by_id(self, note_id: ObjectId) -> dict[str, Any] | None:
        """Unscoped read, for the indexer only (it acts for whoever owns the note)."""
        return await self.collection.find_one({"_id": note_id})

    async def list_page(
        self,
        author_id: ObjectId,
        *,
        status: str,
        tag: str | None,
        after: Position,
        limit: int,
        key_prefix: str | None = None,
    ) -> list[dict[str, Any]]:
        """Newest first by (created_at, _id), or with `key_prefix` the notes whose key starts
        with it, in key order (an index range on the key: a page reads what it returns,
        not every note of the author). `after` is the last item of the previous page."""
        query: dict[str, Any] = {"author_id": author_id, "status": LISTED_STATUS[status]}
        if tag is not None:
            query["tags"] = tag
        if key_prefix is not None:
            query["external_id"] = key_range(key_prefix, after.key)
            order = [("external_id", 1)]
        else:
            order = [("created_at", -1), ("_id", -1)]
            if after.created is not None:
                created, oid = after.created
                query["$or"] = [
                    {"created_at": {"$lt": created}},
                    {"created_at": created, "_id": {"$lt": oid}},
                ]
        cursor = self.collection.find(query, _LIST_PROJECTION).sort(order).limit(limit)
        return await cursor.to_list(length=limit)

    async def patch(
        self,
        note_id: ObjectId,
        author_id: ObjectId,
        *,
        changes: dict[str, Any],
        expected_version: int | None,
        now: datetime,
        index_status: str,
        restore: bool = False,
        times: NoteTimes | None = None,
    ) -> dict[str, Any] | None:
        """Apply `changes` atomically; bump `version` and re-queue only if the title,
        content or tags really change (or `restore` brings a trashed note back). The
        version is the ETag that If-Match checks, so a tag edit bumps it too: else two
        clients editing tags from the same read would both pass If-Match and one edit would
        be lost. A new `external_id` alone is no new version (nothing to index). One
        pipeline update, so 50 concurrent PATCHes cannot lose a bump. `times` set the
        creation and update times of a real change."""
        query = {"_id": note_id, "author_id": author_id, **_version_is(expected_version)}
        tests = [
            {"$ne": [f"${field}", _lit(changes[field])]}
            for field in ("title", "content_md", "tags")
            if field in changes
        ]
        if restore:
            tests.append({"$ne": [{"$ifNull": ["$status", "active"]}, "active"]})
        text_changed: Any = (
            {"$ne": ["$content_md", _lit(changes["content_md"])]}
            if "content_md" in changes
            else False
        )
        requeue = "$_requeue"
        times = times or NoteTimes()

        def if_requeue(value: Any, field: str) -> dict[str, Any]:
            return {"$cond": [requeue, value, f"${field}"]}

        fields = {field: _lit(value) for field, value in changes.items()}
        if restore:
            fields["status"] = if_requeue("active", "status")
        if times.created_at is not None:
            fields["created_at"] = if_requeue(times.created_at, "created_at")
        pipeline = [
            {"$set": {"_requeue": {"$or": tests} if tests else False}},
            {
                "$set": {
                    # Legacy notes (no `version`, or "3") are stored as a whole number.
                    "version": {"$cond": [requeue, NEXT_VERSION, WHOLE_VERSION]},
                    # The version whose text this is: chunk offsets of any version since
                    # still index it (a title or tag edit moves `version`, not the text).
                    "content_version": {
                        "$cond": [
                            text_changed,
                            NEXT_VERSION,
                            {"$ifNull": ["$content_version", WHOLE_VERSION]},
                        ]
                    },
                    "changed_at": if_requeue(now, "changed_at"),
                    "index_status": if_requeue(index_status, "index_status"),
                    "next_attempt_at": if_requeue(now, "next_attempt_at"),
                    "index_attempts": if_requeue(0, "index_attempts"),
                    "index_error": if_requeue(None, "index_error"),
                    "reserved_until": if_requeue(None, "reserved_until"),
                    # A PATCH that changes nothing is no update (it moved `updated_at`,
                    # and with it the recency order and the `updated_after` filter).
                    "updated_at": if_requeue(times.updated_at or now, "updated_at"),
                    **fields,
                }
            },
            {"$unset": ["_requeue"]},
        ]
        try:
            return await self.collection.find_one_and_update(
                query, pipeline, return_document=ReturnDocument.AFTER
            )
        except DuplicateKeyError:
            raise KeyTaken(changes.get("external_id")) from None

    async def set_status(
        self,
        note_id: ObjectId,
        author_id: ObjectId,
        *,
        from_status: str,
        to_status: str,
        now: datetime,
        index_status: str,
        expected_version: int | None = None,
    ) -> dict[str, Any] | None:
        """Trash or restore (only at `expected_version` when given); either way the index
        must follow, so the note is re-queued. `version` (the ETag) moves, `content_version`
        does not: a client that read the note trashed must not purge it with that read's
        If-Match after someone restored it, while chunk offsets still index the unchanged
        text."""
        return await self.collection.find_one_and_update(
            {
                "_id": note_id,
                "author_id": author_id,
                "status": STATUS_QUERY[from_status],
                **_version_is(expected_version),
            },
            [
                {
                    "$set": {
                        "content_version": {"$ifNull": ["$content_version", WHOLE_VERSION]},
                        "version": NEXT_VERSION,
                        "status": to_status,
                        "updated_at": now,
                        **pending_fields(now, index_status),
                    }
                }
            ],
            return_document=ReturnDocument.AFTER,
        )

    async def requeue(
        self, note_id: ObjectId, author_id: ObjectId, now: datetime
    ) -> dict[str, Any] | None:
        """Put a note back on the queue (also a `failed` one) with a fresh attempt budget."""
        return await self.collection.find_one_and_update(
            {"_id": note_id, "author_id": author_id},
            {"$set": pending_fields(now)},
            return_document=ReturnDocument.AFTER,
        )

    async def delete(
        self, note_id: ObjectId, author_id: ObjectId, *, expected_version: int | None = None
    ) -> bool:
        """Delete the note (only at `expected_version` when given)."""
        result = await self.collection.delete_one(
            {"_id": note_id, "author_id": author_id, **_version_is(expected_version)}
        )
        return result.deleted_count == 1

    async def updated_times(self, note_ids: list[ObjectId]) -> dict[ObjectId, datetime]:
        """When each of these notes last changed (`note_updated_at`); absent ones are left out."""
        cursor = self.collection.find(
            {"_id": {"$in": note_ids}}, {"updated_at": 1, "created_at": 1}
        )
        return {doc["_id"]: note_updated_at(doc) async for doc in cursor}


def _version_is(expected: int | None) -> dict[str, Any]:
    """The If-Match condition of a write: the version compared as read (`whole_version`:
    a legacy note without `version` is 1), or none."""
    return {} if expected is None else {"$expr": {"$eq": [WHOLE_VERSION, expected]}}


SEARCH_META = {
    "author_id": 1,
    "title": 1,
    "tags": 1,
    "updated_at": 1,
    "created_at": 1,
    "indexed_version": 1,
    "status": 1,
    "chunk_count": 1,
    # Which generation's chunks the note has (a search index per generation loads them).
    "generation": 1,
    "served": 1,
    "embedding_model": 1,
    "chunking_version": 1,
    "indexed_at": 1,
}


class NotesSearchQueries:
    """The reads search and chat make on `notes` — always scoped to one author."""

    def __init__(self, db: AsyncDatabase) -> None:
        self.collection = db.notes

    async def active_metas(
        self, author_id: ObjectId, note_ids: list[ObjectId]
    ) -> list[dict[str, Any]]:
        """The author's ACTIVE notes among `note_ids` (search verifies every candidate here:
        a note trashed, purged or owned by someone else is never returned)."""
        if not note_ids:
            return []
        cursor = self.collection.find(
            {"_id": {"$in": note_ids}, "author_id": author_id, "status": ACTIVE}, SEARCH_META
        )
        return await cursor.to_list()

    async def text_windows(
        self, author_id: ObjectId, windows: Mapping[ObjectId, Sequence[tuple[int, int]]]
    ) -> list[dict[str, Any]]:
        """The author's ACTIVE notes among `windows`' keys, each with `version`,
        `content_version` and `windows`: the texts `content_md[start:end]` of its requested
        `(start, end)` code-point windows, in order (None when `content_md` is not a
        string). Only those parts of a long note leave the server."""
        if not windows:
            return []
        branches = [
            {
                "case": {"$eq": ["$_id", note_id]},
                "then": [{"$substrCP": ["$content_md", a, b - a]} for a, b in spans],
            }
            for note_id, spans in windows.items()
        ]
        is_text = {"$eq": [{"$type": "$content_md"}, "string"]}
        cut = {"$switch": {"branches": branches, "default": []}}
        pipeline = [
            {"$match": {"_id": {"$in": list(windows)}, "author_id": author_id, "status": ACTIVE}},
            {
                "$project": {
                    "version": 1,
                    "content_version": 1,
                    "windows": {"$cond": [is_text, cut, None]},
                }
            },
        ]
        cursor = await self.collection.aggregate(pipeline)
        return await cursor.to_list()

    async def iter_indexed(self, batch_size: int = 500) -> Any:
        """Every active note that has searchable chunks (for loading a search index)."""
        cursor = self.collection.find(
            {"status": ACTIVE, "indexed_version": {"$ne": None}}, SEARCH_META
        ).batch_size(batch_size)
        async for doc in cursor:
            yield doc

    async def count_active(self, query: dict[str, Any], *, limit: int) -> int:
        """How many notes match `query` (an author's active ones: `notes_filter_query`),
        counting at most `limit`."""
        return await self.collection.count_documents(query, limit=limit)

    async def recent_for_author(
        self, author_id: ObjectId, *, limit: int, query: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """The author's newest active notes with content (note-level fallback search)."""
        cursor = (
            self.collection.find(
                {"author_id": author_id, "status": ACTIVE, **(query or {})},
                {**SEARCH_META, "content_md": 1, "version": 1},
            )
            .sort("updated_at", -1)
            .limit(limit)
        )
        return await cursor.to_list()
