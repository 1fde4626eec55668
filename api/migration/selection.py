"""Which notes the migration selects, how it enqueues them, and how it reads a note's state.

Pure: query documents, update pipelines and verdicts, no I/O (the queries run in
`api.migration.repository`). A note needs indexing unless it is verifiably up to date: `indexed`
at its current `version` by the configured chunker (`chunking_version`) and embedding model.
That covers every case the migration exists for — legacy documents with no index fields,
`chunk_count` 0/missing on a note that was never indexed, a stale chunker or model, `failed`
— without re-selecting a note whose content legitimately yields zero chunks (an empty or
heading-only note), which would make every rerun do work forever.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from bson import ObjectId

from api.notes.stored import FIRST_MS, LAST_MS, STRING_YEAR
from api.notes.versioning import WHOLE_VERSION, is_whole_version, whole_version

Reason = Literal[
    "legacy", "failed", "never_indexed", "stale_model", "stale_chunker", "behind", "queued"
]
REASONS: tuple[Reason, ...] = (
    "legacy",
    "failed",
    "never_indexed",
    "stale_model",
    "stale_chunker",
    "behind",
    "queued",
)

# What the per-note loop reads to decide whether to wait, retry or stop.
STATE_PROJECTION = {
    "status": 1,
    "version": 1,
    "index_status": 1,
    "index_error": 1,
    "index_attempts": 1,
    "next_attempt_at": 1,
    "lease_expires_at": 1,
    "indexed_version": 1,
    "chunk_count": 1,
    "chunking_version": 1,
    "embedding_model": 1,
    "last_index_stats": 1,
    "changed_at": 1,
    "reserved_until": 1,
    "indexed_at": 1,
}


@dataclass(frozen=True, slots=True)
class Selection:
    """What to migrate: the configured index identity plus the operator's filters."""

    chunking_version: str
    embedding_model: str
    authors: tuple[ObjectId, ...] = ()
    since: datetime | None = None
    include_failed: bool = True
    limit: int | None = None

    def base_filter(self, *, active_only: bool = True, addressable: bool = True) -> dict[str, Any]:
        """The operator's filters only (active notes, authors, created_at). A note with no
        `status` (older documents) is active, as the API reads it; enqueueing stores it.
        `addressable`: only notes whose `_id` is an ObjectId, the only ids the API can
        address (False: only the others, which the run reports instead of indexing; range
        pages over `_id` compare one BSON type only, so they would never reach them)."""
        query: dict[str, Any] = {"status": {"$in": ["active", None]}} if active_only else {}
        kind = {"$type": "objectId"}
        query["_id"] = kind if addressable else {"$not": kind}
        if self.authors:
            query["author_id"] = {"$in": list(self.authors)}
        if self.since is not None:
            # As enqueueing reads it: a legacy ISO string or epoch milliseconds is the date
            # it spells (a plain range would skip such notes silently), and a note with no
            # creation date was created at its `_id`'s second.
            created = {"$ifNull": [_as_date("$created_at"), _as_date("$_id")]}
            query["$expr"] = {"$gte": [created, {"$literal": self.since}]}
        return query

    def up_to_date(self) -> dict[str, Any]:
        """Indexed at the note's current version by this chunker and model."""
        return {
            "index_status": "indexed",
            "chunking_version": self.chunking_version,
            "embedding_model": self.embedding_model,
            # A legacy note without `version` is version 1 (what the reconciler assumes);
            # one whose `version` is stored as "3" or 3.0 is selected, so enqueueing
            # stores 3 (MongoDB compares 3.0 equal to 3: the type is checked too).
            "$expr": {
                "$and": [
                    {"$eq": ["$indexed_version", {"$ifNull": ["$version", 1]}]},
                    {"$in": [{"$type": "$version"}, ["int", "long", "null", "missing"]]},
                    {"$eq": [{"$ifNull": ["$version", 1]}, WHOLE_VERSION]},  # not 0, not -1
                ]
            },
        }

    def query(self, *, addressable: bool = True) -> dict[str, Any]:
        """Notes that need indexing under these filters."""
        query = {**self.base_filter(addressable=addressable), "$nor": [self.up_to_date()]}
        if not self.include_failed:
            query["index_status"] = {"$ne": "failed"}
        return query


def lease_free(now: datetime) -> dict[str, Any]:
    """No live lease: nobody is indexing the note right now (or its worker died)."""
    return {"$or": [{"lease_expires_at": None}, {"lease_expires_at": {"$lt": now}}]}


def enqueue_filter(ids: list[ObjectId], selection: Selection, now: datetime) -> dict[str, Any]:
    """Re-check the selection at write time: a note indexed meanwhile is left alone, and a
    note someone is indexing right now keeps its lease (its worker finishes it)."""
    return {"$and": [{"_id": {"$in": ids}}, selection.query(), lease_free(now)]}


def _fill(field_name: str, default: Any) -> dict[str, Any]:
    return {"$ifNull": [f"${field_name}", default]}


def unaddressable_detail(note_id: Any) -> str:
    """Why a note whose `_id` is not an ObjectId is reported instead of indexed."""
    return (
        f"_id is {type(note_id).__name__} {note_id!r}, not an ObjectId: the API cannot address "
        "this note; insert it again with an ObjectId _id"
    )


def _as_date(path: str) -> dict[str, Any]:
    """A stored time as a date (ISO strings, epoch milliseconds, an ObjectId's second), or
    null, as `api.notes.stored.as_datetime` reads it. A number past what a date holds is
    null: converting it makes the server fail the whole batch's update."""
    convert = {"$convert": {"input": "$$v", "to": "date", "onError": None, "onNull": None}}
    numeric = {"$in": [{"$type": "$$v"}, ["int", "long", "double", "decimal"]]}
    whole = {"$trunc": "$$v"}
    out_of_range = {"$or": [{"$lt": [whole, FIRST_MS]}, {"$gt": [whole, LAST_MS]}]}
    # A string only with a four-digit year (the server reads "10000-01-01" as 2000), and any
    # result past what a date holds is null (an offset can push "9999-12-31T23:00-05:00"
    # there, and the server fails the whole batch); `as_datetime` applies the same rules.
    bad_string = {
        "$and": [
            {"$eq": [{"$type": "$$v"}, "string"]},
            {"$not": [{"$regexMatch": {"input": "$$v", "regex": STRING_YEAR.pattern}}]},
        ]
    }
    refused = {"$or": [{"$and": [numeric, out_of_range]}, bad_string]}
    in_range = {
        "$and": [
            {"$gte": ["$$d", {"$toDate": FIRST_MS}]},
            {"$lte": ["$$d", {"$toDate": LAST_MS}]},
        ]
    }
    return {
        "$let": {
            "vars": {"v": path},
            "in": {
                "$let": {
                    "vars": {"d": {"$cond": [refused, None, convert]}},
                    "in": {"$cond": [in_range, "$$d", None]},
                }
            },
        }
    }


def enqueue_update(now: datetime, reserve_until: datetime | None = None) -> list[dict[str, Any]]:
    """Put a note on the indexing queue WITHOUT clobbering anything, reserved for the
    migration until `reserve_until` (workers claiming the next due note pass it over; see
    `api.indexing.queue`).

    Only missing fields are filled (`version` → 1, `status` → active, `updated_at` →
    `created_at`, the index fields → their empty values) and times stored as strings or
    numbers become dates (else the `_id`'s second, else now: a string `created_at` sorts
    apart from every date in listings and breaks their cursors); title, content and tags
    are never written (readers take their legacy shapes, `api.notes.stored`), and an
    existing `version` is only rewritten as every reader already reads it (`WHOLE_VERSION`:
    a legacy "3" or 3.0 becomes 3, junk becomes 1), so an edit the API makes at any moment
    survives whichever write lands first: the API's writes also just set `pending`, and
    versions only grow. The attempt budget is reset, so `failed` notes are retried, except
    for a note whose last run died with its process (`indexing`, lease run out): it stays
    that, claimable, with its attempts, so a note that kills every process indexing it ends
    `failed` after the attempt budget instead of killing every rerun of the migration at
    the same place.
    """
    # The filter saw its lease run out (an `indexing` note with no lease is no claim at all).
    died = {
        "$and": [
            {"$eq": ["$index_status", "indexing"]},
            {"$eq": [{"$type": "$lease_expires_at"}, "date"]},
        ]
    }
    return [
        _shape_stage(now),
        {
            "$set": {
                "version": WHOLE_VERSION,
                "updated_at": _UPDATED_AT,
                # A millisecond before its re-queue (`next_attempt_at`, now): a user's write
                # stamps both alike, and this must never read as one (`_users_write`).
                "changed_at": _fill("changed_at", now - timedelta(milliseconds=1)),
                "indexed_version": _fill("indexed_version", None),
                "chunk_count": _fill("chunk_count", 0),
                "chunking_strategy": _fill("chunking_strategy", None),
                "chunking_version": _fill("chunking_version", None),
                "embedding_model": _fill("embedding_model", None),
                "last_chunked_at": _fill("last_chunked_at", None),
                "last_index_stats": _fill("last_index_stats", None),
                "index_status": {"$cond": [died, "indexing", "pending"]},
                # A user's write keeps its stamps, so it still reads as one (`settle`).
                "next_attempt_at": {
                    "$cond": [_users_write(now), "$next_attempt_at", {"$literal": now}]
                },
                "index_attempts": {"$cond": [died, {"$ifNull": ["$index_attempts", 0]}, 0]},
                "index_error": None,
                "reserved_until": _reservation(now, reserve_until),
            }
        },
    ]


def _shape_stage(now: datetime) -> dict[str, Any]:
    """Stored `created_at` as a date (else the `_id`'s second, else now); a missing
    `status` as active, one the API never writes ("archived", read as trashed) as
    "trashed", its value kept in `legacy_status` (listings match "trashed" exactly)."""
    created = {"$ifNull": [_as_date("$created_at"), _as_date("$_id"), {"$literal": now}]}
    known = {"$in": ["$status", ["active", "trashed"]]}
    missing = {"$eq": [{"$ifNull": ["$status", None]}, None]}
    status = {"$cond": [known, "$status", {"$cond": [missing, "active", "trashed"]}]}
    legacy = {"$cond": [{"$or": [known, missing]}, "$legacy_status", "$status"]}
    return {"$set": {"created_at": created, "status": status, "legacy_status": legacy}}


# After `_shape_stage`: "$created_at" is the date it stored.
_UPDATED_AT = {"$ifNull": [_as_date("$updated_at"), "$created_at"]}


def shape_filter(selection: Selection) -> dict[str, Any]:
    """Notes of the operator's filters (any status, indexed or not) still stored in a legacy
    shape: no `status` or one the API never writes, or `created_at`/`updated_at` not a
    date. Enqueueing fixes the notes it selects, but a legacy note an API worker indexed
    first (after an edit, or a `check --repair`) is never selected, and would keep a string
    `created_at` that listings page apart from every date."""
    legacy = {
        "$or": [
            {"status": {"$nin": ["active", "trashed"]}},
            {"created_at": {"$not": {"$type": "date"}}},
            {"updated_at": {"$not": {"$type": "date"}}},
        ]
    }
    return {"$and": [selection.base_filter(active_only=False), legacy]}


def shape_update(now: datetime) -> list[dict[str, Any]]:
    """Only the shape fields of `enqueue_update`: the index state is left as it is."""
    return [_shape_stage(now), {"$set": {"updated_at": _UPDATED_AT}}]


def _users_write(now: datetime) -> dict[str, Any]:
    """A user's write no worker has finished: queued (or claimed by a worker that died)
    by the write itself, which stamps `changed_at` and `next_attempt_at` alike. Other
    re-queues (a new chunker or model at start-up, a retry's back-off, a recheck) move
    `next_attempt_at` alone, and a legacy note has no `changed_at`: those are the
    migration's to index."""
    return {
        "$and": [
            {"$in": ["$index_status", ["pending", "indexing"]]},
            {"$not": [{"$gt": ["$reserved_until", {"$literal": now}]}]},
            {"$eq": [{"$type": "$changed_at"}, "date"]},
            {"$eq": [{"$type": "$next_attempt_at"}, "date"]},
            {"$gte": ["$changed_at", "$next_attempt_at"]},
        ]
    }


def users_write_waiting(note: dict[str, Any], now: datetime) -> bool:
    """`_users_write` on a note read back (`STATE_PROJECTION`), for `settle`."""
    reserved = note.get("reserved_until")
    changed, due = note.get("changed_at"), note.get("next_attempt_at")
    return (
        note.get("index_status") in ("pending", "indexing")
        and (reserved is None or reserved <= now)
        and isinstance(changed, datetime)
        and isinstance(due, datetime)
        and changed >= due
    )


def _reservation(now: datetime, until: datetime | None) -> Any:
    """`until`, except for a user's write no worker has finished (`_users_write`): that
    stays the workers', so the migration reaching it never makes a user's edit wait for
    its turn."""
    if until is None:
        return None
    return {"$cond": [_users_write(now), None, {"$literal": until}]}


def catch_up_filter(
    selection: Selection, *, started_at: datetime, first_id: Any, last_id: Any
) -> dict[str, Any]:
    """Notes in the migrated range that an edit re-queued after the run started (the
    migration may already have indexed their previous version). Trashed ones too: their
    chunks must leave the index, as an edited note's new version must enter it, even when
    no API worker runs beside the migration."""
    return {
        **selection.base_filter(active_only=False),
        "_id": {"$gte": first_id, "$lte": last_id},
        "index_status": "pending",
        "changed_at": {"$gte": started_at},
    }


def reason(note: dict[str, Any], chunking_version: str, embedding_model: str) -> Reason:
    """Why a selected note needs indexing (for the dry run's breakdown)."""
    status = note.get("index_status")
    if status is None:
        return "legacy"
    if status == "failed":
        return "failed"
    if note.get("indexed_version") is None or not note.get("chunk_count"):
        return "never_indexed"
    if note.get("embedding_model") != embedding_model:
        return "stale_model"
    if note.get("chunking_version") != chunking_version:
        return "stale_chunker"
    stored = note.get("version")
    if stored is not None and not is_whole_version(stored):
        return "legacy"  # a version stored as "3", 3.0 or 0: enqueueing makes it whole
    if note.get("indexed_version") != whole_version(stored):
        return "behind"
    return "queued"
