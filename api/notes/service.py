"""Notes business rules: validation limits, versioning, trash/restore, pagination, and
handing changed notes to the indexer. No FastAPI here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import structlog
from bson import ObjectId

from api.chunk_store.repository import ChunksRepository
from api.db.ids import parse_object_id
from api.errors import (
    BadRequest,
    Conflict,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
    ValidationFailed,
)
from api.notes.paging import Position, decode_cursor, encode_cursor
from api.notes.repository import KeyTaken, NotesRepository, pending_fields
from api.notes.schemas import NoteCreate, NotePatch, NoteUpsert
from api.notes.stored import note_status
from api.notes.types import NoteTimes, Upserted, key_folder
from api.notes.versioning import whole_version
from api.schemas import normalize_tags
from api.users.types import User

log = structlog.get_logger(__name__)

# Called after every write that changes what the index should contain. In async mode it wakes
# the workers and returns False; with CHUNKING_ASYNC=false it indexes the note before
# returning and returns True (the caller then returns the note's fresh index state).
IndexTrigger = Callable[[ObjectId], Awaitable[bool]]


class NoteTooLarge(PayloadTooLarge):
    code = "note_too_large"


def parse_note_id(value: str) -> ObjectId:
    """Path ids must be 24 hex digits; anything else is a clear 400, not a 500 or a 404."""
    oid = parse_object_id(value)
    if oid is None:
        raise BadRequest("invalid note id: expected 24 hexadecimal characters")
    return oid


_STATUS_ATTEMPTS = 5


def bson_now() -> datetime:
    """Now, at BSON's millisecond precision: a response built from a document before it
    is stored (create) then shows the timestamps a later read returns."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def parse_if_match(value: str | None) -> int | None:
    """`If-Match: 3`, `"3"` or `W/"3"` → 3; absent or `*` (RFC 9110: any current version,
    which an existing note always has) → None."""
    if value is None or value.strip() == "*":
        return None
    raw = value.strip().removeprefix("W/").strip('"')
    if not raw.isdigit() or len(raw) > 12:
        raise BadRequest("If-Match must be a note version number, e.g. If-Match: 3")
    return int(raw)


class NotesService:
    """The notes use cases, always on behalf of one authenticated `User`."""

    def __init__(
        self,
        repo: NotesRepository,
        chunks: ChunksRepository,
        *,
        max_note_bytes: int,
        max_tags: int,
        max_tag_length: int,
        chunking_enabled: bool,
        chunking_strategy: str,
        chunking_version: str,
        on_change: IndexTrigger | None = None,
        on_purge: Callable[[ObjectId], None] | None = None,
    ) -> None:
        self._repo = repo
        self._chunks = chunks
        self._max_note_bytes = max_note_bytes
        self._max_tags = max_tags
        self._max_tag_length = max_tag_length
        self._chunking_enabled = chunking_enabled
        self._strategy = chunking_strategy
        self._chunking_version = chunking_version
        self._on_change = on_change
        self._on_purge = on_purge

    @property
    def _queue_status(self) -> str:
        return "pending" if self._chunking_enabled else "disabled"

    def _check_limits(self, content_md: str | None, tags: list[str] | None) -> None:
        """The configured limits, on the values as sent (before tags are normalised)."""
        if content_md is not None:
            size = len(content_md.encode("utf-8"))
            if size > self._max_note_bytes:
                raise NoteTooLarge(
                    f"content_md is {size} bytes; the limit is {self._max_note_bytes} bytes"
                )
        if tags is not None:
            if len(tags) > self._max_tags:
                raise ValidationFailed(f"too many tags: {len(tags)} > {self._max_tags}")
            long_tags = [t for t in tags if len(t) > self._max_tag_length]
            if long_tags:
                raise ValidationFailed(
                    f"tag longer than {self._max_tag_length} characters: {long_tags[0][:80]!r}"
                )

    async def _changed(self, doc: dict[str, Any]) -> dict[str, Any]:
        if self._on_change is None or not self._chunking_enabled:
            return doc
        if not await self._on_change(doc["_id"]):
            return doc
        # Synchronous mode: the note was just indexed; return its fresh state.
        return await self._repo.get_by_id(doc["_id"]) or doc

    async def _owned(self, user: User, note_id: str) -> dict[str, Any]:
        doc = await self._repo.get(parse_note_id(note_id), user.id)
        if doc is None:
            raise NotFound("note not found")
        return doc

    @property
    def tag_limits(self) -> tuple[int, int]:
        """(most tags per note, longest tag in characters), as configured."""
        return self._max_tags, self._max_tag_length

    def check_tags(self, tags: list[str]) -> None:
        """The configured tag count and length limits (ValidationFailed), as `create`
        applies them, for tags checked before any note is written (an import's)."""
        self._check_limits(None, tags)

    def _new_doc(self, user: User, data: NoteCreate, times: NoteTimes | None) -> dict[str, Any]:
        now = bson_now()
        times = times or NoteTimes()
        doc: dict[str, Any] = {
            "author_id": user.id,
            "title": data.title,
            "content_md": data.content_md,
            "tags": normalize_tags(data.tags),
            "status": "active",
            "version": 1,
            "content_version": 1,
            "created_at": times.created_at or now,
            "updated_at": times.updated_at or now,
            **pending_fields(now, self._queue_status),
            "indexed_version": None,
            "chunk_count": 0,
            "chunking_strategy": self._strategy,
            "chunking_version": self._chunking_version,
            "embedding_model": None,
            "last_chunked_at": None,
            "last_index_stats": None,
        }
        if isinstance(data, NoteUpsert):
            doc["external_id"] = data.external_id
            doc["folder"] = key_folder(data.external_id)
        return doc

    async def _created(self, user: User, doc: dict[str, Any]) -> dict[str, Any]:
        log.info(
            "note.created",
            note_id=str(doc["_id"]),
            user_id=str(user.id),
            bytes=len(doc["content_md"]),
        )
        return await self._changed(doc)

    async def create(
        self, user: User, data: NoteCreate, times: NoteTimes | None = None
    ) -> dict[str, Any]:
        """Store a new note (version 1) and queue it for indexing."""
        self._check_limits(data.content_md, data.tags)
        return await self._created(user, await self._repo.insert(self._new_doc(user, data, times)))

    async def upsert(
        self, user: User, data: NoteUpsert, times: NoteTimes | None = None
    ) -> Upserted:
        """Make the user's note with key `data.external_id` hold this title, content and
        tags: create it (version 1), or update it (a trashed one is restored) with one
        version bump, or, when it already holds them, write nothing at all (same version,
        same `updated_at`, nothing queued). Two upserts of a new key at once make one note:
        the unique index refuses the second insert, which then updates the first's note."""
        self._check_limits(data.content_md, data.tags)
        changes = {
            "title": data.title,
            "content_md": data.content_md,
            "tags": normalize_tags(data.tags),
        }
        for _ in range(_STATUS_ATTEMPTS):
            current = await self._repo.get_by_external_id(user.id, data.external_id)
            if current is None:
                doc = await self._repo.insert_keyed(self._new_doc(user, data, times))
                if doc is not None:
                    return Upserted(await self._created(user, doc), "created")
                continue  # a concurrent upsert inserted it first: update that note
            if _holds(current, changes):
                return Upserted(current, "unchanged")
            # Last writer wins (a PUT): the update compares and bumps atomically by itself.
            doc = await self._repo.patch(
                current["_id"],
                user.id,
                changes=changes,
                expected_version=None,
                now=bson_now(),
                index_status=self._queue_status,
                restore=True,
                times=times,
            )
            if doc is None:
                continue  # purged since the read
            if whole_version(doc.get("version")) == whole_version(current.get("version")):
                return Upserted(doc, "unchanged")  # a concurrent upsert wrote the same
            log.info("note.updated", note_id=str(doc["_id"]), version=doc.get("version"))
            return Upserted(await self._changed(doc), "updated")
        raise Conflict("the note with this external_id keeps changing; retry")

    async def get(self, user: User, note_id: str) -> dict[str, Any]:
        return await self._owned(user, note_id)

    async def list(
        self,
        user: User,
        *,
        status: str,
        tag: str | None,
        cursor: str | None,
        limit: int,
        external_id_prefix: str | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of the user's notes, newest first, or in key order among those whose
        `external_id` starts with `external_id_prefix` (a key cursor continues that
        order); `tag` is compared as tags are stored (trimmed)."""
        if tag is not None:
            tag = normalize_tags([tag])[0]
            if not tag:
                raise ValidationFailed("tag must not be blank")
        after = decode_cursor(cursor) if cursor else Position()
        by_key = external_id_prefix is not None or after.key is not None
        docs = await self._repo.list_page(
            user.id,
            status=status,
            tag=tag,
            after=after,
            limit=limit + 1,
            key_prefix=(external_id_prefix or "") if by_key else None,
        )
        more = len(docs) > limit
        next_cursor = encode_cursor(docs[limit - 1], by_key=by_key) if more else None
        return docs[:limit], next_cursor

    async def patch(
        self, user: User, note_id: str, data: NotePatch, if_match: str | None
    ) -> dict[str, Any]:
        """Partial update; `If-Match: <version>` makes it conditional (412 on mismatch).
        A new `external_id` must not be another of the user's notes' (409)."""
        oid = parse_note_id(note_id)
        expected = parse_if_match(if_match)
        changes = data.model_dump(exclude_unset=True)
        if not changes:
            raise ValidationFailed(
                "nothing to update: send at least one of title, content_md, tags, external_id"
            )
        self._check_limits(changes.get("content_md"), changes.get("tags"))
        if "tags" in changes:
            changes["tags"] = normalize_tags(changes["tags"])
        if "external_id" in changes:
            changes["folder"] = key_folder(changes["external_id"])
        try:
            doc = await self._repo.patch(
                oid,
                user.id,
                changes=changes,
                expected_version=expected,
                now=bson_now(),
                index_status=self._queue_status,
            )
        except KeyTaken:
            raise Conflict("another of your notes has this external_id") from None
        if doc is None:
            await self._unchanged(oid, user, expected)
            raise PreconditionFailed("the note changed during the request; retry")
        log.info(
            "note.updated", note_id=note_id, version=doc.get("version"), fields=sorted(changes)
        )
        return await self._changed(doc)

    async def _unchanged(self, oid: ObjectId, user: User, expected: int | None) -> dict[str, Any]:
        """The note after a conditional write matched nothing: NotFound if it does not
        exist (for this user), PreconditionFailed if it is not at `expected`."""
        current = await self._repo.get(oid, user.id)
        if current is None:
            raise NotFound("note not found")
        current_version = whole_version(current.get("version"))
        if expected is not None and current_version != expected:
            raise PreconditionFailed(
                f"If-Match version {expected} does not match current version {current_version}"
            )
        return current

    async def trash(self, user: User, note_id: str, if_match: str | None = None) -> dict[str, Any]:
        """Soft delete: the note becomes `trashed` and its chunks leave the index.
        `If-Match: <version>` makes it conditional (412 on mismatch)."""
        return await self._set_status(user, note_id, if_match, "active", "trashed")

    async def restore(
        self, user: User, note_id: str, if_match: str | None = None
    ) -> dict[str, Any]:
        """Bring a trashed note back; its chunks return (embeddings reused, not recomputed).
        `If-Match: <version>` makes it conditional (412 on mismatch)."""
        return await self._set_status(user, note_id, if_match, "trashed", "active")

    async def _set_status(
        self, user: User, note_id: str, if_match: str | None, from_status: str, to_status: str
    ) -> dict[str, Any]:
        oid = parse_note_id(note_id)
        expected = parse_if_match(if_match)
        for _ in range(_STATUS_ATTEMPTS):
            doc = await self._repo.set_status(
                oid,
                user.id,
                from_status=from_status,
                to_status=to_status,
                now=bson_now(),
                index_status=self._queue_status,
                expected_version=expected,
            )
            if doc is not None:
                event = "note.trashed" if to_status == "trashed" else "note.restored"
                log.info(event, note_id=note_id)
                return await self._changed(doc)
            # 404 if absent; already in `to_status` is fine whatever the version (a
            # retried trash changes nothing, while the first one moved the version);
            # else 412 at another version.
            current = await self._repo.get(oid, user.id)
            if current is not None and note_status(current) == to_status:
                return current
            await self._unchanged(oid, user, expected)
            # Back in `from_status` already (a concurrent trash and restore): try again.
        raise Conflict("the note's status keeps changing; retry")

    async def purge(self, user: User, note_id: str, if_match: str | None = None) -> None:
        """Permanent delete of the note and its chunks. `If-Match: <version>` makes it
        conditional (412 on mismatch: a concurrent edit is never deleted unseen)."""
        oid = parse_note_id(note_id)
        expected = parse_if_match(if_match)
        if not await self._repo.delete(oid, user.id, expected_version=expected):
            await self._unchanged(oid, user, expected)
            raise PreconditionFailed("the note changed during the request; retry")
        removed = await self._chunks.delete_for_note(oid)
        log.info("note.purged", note_id=note_id, chunks_deleted=removed)
        if self._on_purge is not None:
            self._on_purge(oid)

    async def chunks(self, user: User, note_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The note and the chunks of its indexed version (what search sees), in order."""
        doc = await self._owned(user, note_id)
        version = doc.get("indexed_version")
        if version is None:
            return doc, []
        return doc, await self._chunks.for_version(doc["_id"], version)

    async def reindex(self, user: User, note_id: str) -> dict[str, Any]:
        """Queue the note for indexing again (also a `failed` one, with a fresh budget)."""
        if not self._chunking_enabled:
            raise ValidationFailed("chunking is disabled (CHUNKING_ENABLED=false)")
        doc = await self._repo.requeue(parse_note_id(note_id), user.id, bson_now())
        if doc is None:
            raise NotFound("note not found")
        log.info("note.reindex_requested", note_id=note_id)
        return await self._changed(doc)


def _holds(doc: dict[str, Any], changes: dict[str, Any]) -> bool:
    """Whether the stored note is active and holds exactly these title, content and tags."""
    return (
        note_status(doc) == "active"
        and doc.get("title") == changes["title"]
        and doc.get("content_md") == changes["content_md"]
        and doc.get("tags") == changes["tags"]
    )
