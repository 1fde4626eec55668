"""The indexing queue: queries on the `notes` collection used by the reconciler.

The note document is the queue entry (an outbox that cannot be lost: the write that changes
a note is the write that enqueues it). A worker takes a note with an atomic
`find_one_and_update` that sets a lease (`lease_token`, `lease_expires_at`); edits during
indexing set `index_status: pending` but cannot be claimed while the lease is held, so rapid
edits coalesce into one more run on the latest version. An expired lease (crashed worker) is
claimable again; `index_attempts` counts claims, so a note that crashes workers ends `failed`.

A migration reserves the notes it enqueues (`reserved_until`; see `api.migration.runner`):
claims of "the next due note" pass them over, a claim naming a note does not.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from bson import ObjectId
from pymongo import ReturnDocument
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase

from api.notes.stored import STATUS_QUERY


def _unreserved(now: datetime) -> dict[str, Any]:
    """No live migration reservation (missing, null, or run out)."""
    return {"$or": [{"reserved_until": None}, {"reserved_until": {"$lte": now}}]}


# Only notes the API can address are indexed: a legacy `_id` that is not an ObjectId made
# search fail once `check --repair` had queued such a note (found by review); the migration
# lists those notes as failed instead.
_ADDRESSABLE: dict[str, Any] = {"_id": {"$type": "objectId"}}


def _due(now: datetime, *, reserved_ok: bool = False) -> dict[str, Any]:
    """Queued, due, nobody holds a live lease on it and (unless `reserved_ok`) no migration
    has reserved it."""
    free = {"$or": [{"lease_expires_at": None}, {"lease_expires_at": {"$lt": now}}]}
    query: dict[str, Any] = {
        "index_status": "pending",
        "next_attempt_at": {"$lte": now},
        **_ADDRESSABLE,
    }
    query["$and"] = [free] if reserved_ok else [free, _unreserved(now)]
    return query


def _dead(now: datetime, *, reserved_ok: bool = False) -> dict[str, Any]:
    """A worker died mid-run: its lease ran out while the note said "indexing". A dead
    migration's note waits for its reservation to run out too (a rerun claims it by id)."""
    query: dict[str, Any] = {
        "index_status": "indexing",
        "lease_expires_at": {"$lt": now},
        **_ADDRESSABLE,
    }
    if not reserved_ok:
        query["$and"] = [_unreserved(now)]
    return query


# A run's note handed back untouched: claimable at once, and not counted as an attempt.
_HAND_BACK = [
    {
        "$set": {
            "index_status": {
                "$cond": [{"$eq": ["$index_status", "indexing"]}, "pending", "$index_status"]
            },
            "index_attempts": {"$max": [0, {"$subtract": ["$index_attempts", 1]}]},
            "lease_token": None,
            "lease_expires_at": None,
        }
    }
]


def lease_expiry(now: datetime, lease_s: float) -> datetime:
    """When a lease taken at `now` runs out. A claim stores it, and the claim's note is found
    again by it (with the token) when the claim's reply was lost: one computation for both,
    as the lookup needs the exact value."""
    return now + timedelta(seconds=lease_s)


def _under_lease(token: str, expires: datetime) -> dict[str, Any]:
    """The notes one claim holds: its token and its exact expiry (the `index_lease` index)."""
    return {"lease_expires_at": expires, "lease_token": token}


def _claimable(now: datetime, max_attempts: int, *, reserved_ok: bool) -> dict[str, Any]:
    return {
        "$or": [_due(now, reserved_ok=reserved_ok), _dead(now, reserved_ok=reserved_ok)],
        "index_attempts": {"$lt": max_attempts},
    }


class IndexQueue:
    """Claim / heartbeat / complete / fail, each fenced by the lease token."""

    def __init__(self, db: AsyncDatabase) -> None:
        self.collection = db.notes

    async def claim(
        self,
        *,
        token: str,
        now: datetime,
        lease_s: float,
        max_attempts: int,
        note_id: ObjectId | None = None,
    ) -> dict[str, Any] | None:
        """Atomically take the most overdue claimable note of anyone, a note whose worker
        died included (or `note_id` if claimable, even if a migration reserved it: whoever
        names a note wants it now)."""
        query = _claimable(now, max_attempts, reserved_ok=note_id is not None)
        if note_id is not None:
            query = {"_id": note_id, **query}
        return await self._take(query, token=token, now=now, lease_s=lease_s)

    async def claim_for_author(
        self,
        author_id: ObjectId | None,
        *,
        token: str,
        now: datetime,
        lease_s: float,
        max_attempts: int,
    ) -> dict[str, Any] | None:
        """Atomically take the author's most overdue due note (`None`: notes with no
        author); one range of the `index_queue_author` index."""
        query = {**_due(now), "author_id": author_id, "index_attempts": {"$lt": max_attempts}}
        return await self._take(query, token=token, now=now, lease_s=lease_s)

    async def _take(
        self,
        query: dict[str, Any],
        *,
        token: str,
        now: datetime,
        lease_s: float,
        sort: list[tuple[str, int]] | None = None,
    ) -> dict[str, Any] | None:
        expires = lease_expiry(now, lease_s)
        taken = await self.collection.find_one_and_update(
            query,
            {
                "$set": {
                    "index_status": "indexing",
                    "lease_token": token,
                    "lease_expires_at": expires,
                    "claimed_at": now,
                },
                "$inc": {"index_attempts": 1},
            },
            sort=sort or [("next_attempt_at", 1)],
            return_document=ReturnDocument.AFTER,
        )
        # The driver retries a write whose reply was lost; a database restarted in between
        # has forgotten the first attempt and runs the claim again. Finding nothing (the
        # first attempt took the note), the note under this lease is ours; finding another
        # note, the first one goes back. (Either way it sat under a lease nobody held for
        # the whole lease; found by review.) One indexed lookup on `index_lease`.
        if taken is None:
            return await self.collection.find_one(_under_lease(token, expires))
        await self.release_unconfirmed_claim(token, expires, keep=taken["_id"])
        return taken

    async def claim_stale(
        self, *, token: str, now: datetime, lease_s: float, max_attempts: int
    ) -> dict[str, Any] | None:
        """Atomically take a note whose worker died mid-run (lease expired while
        `indexing`), the longest dead first."""
        query = {**_dead(now), "index_attempts": {"$lt": max_attempts}}
        return await self._take(
            query, token=token, now=now, lease_s=lease_s, sort=[("lease_expires_at", 1)]
        )

    async def due_authors(self, now: datetime) -> list[ObjectId | None]:
        """Authors with notes due for indexing now (None: notes without an author), for
        `AuthorRotation`; authors whose notes all wait out a back-off, or are all under a
        live lease (edited while a worker indexes them), are not listed."""
        query = _due(now)
        authors: list[ObjectId | None] = await self.collection.distinct("author_id", query)
        # DISTINCT leaves out documents without the field (it lists an explicit null only).
        if None not in authors and await self.collection.find_one(
            {**query, "author_id": None}, {"_id": 1}, hint="index_queue_author"
        ):
            authors.append(None)
        return authors

    async def others_due(self, author_id: ObjectId | None, now: datetime) -> bool:
        """Whether an author other than `author_id` has a note due now."""
        query = {**_due(now), "author_id": {"$ne": author_id}}
        return await self.collection.find_one(query, {"_id": 1}) is not None

    async def extend_lease(self, note_id: ObjectId, token: str, until: datetime) -> bool:
        result = await self.collection.update_one(
            {"_id": note_id, "lease_token": token}, {"$set": {"lease_expires_at": until}}
        )
        return result.matched_count == 1

    async def holding(self, note_id: ObjectId, token: str) -> dict[str, Any] | None:
        """The note if the run with `token` still holds its lease, else None. The token is
        what fences, as in `complete`: a run whose lease ran out but that nobody took over
        still holds it (checking the expiry too threw such a run's embeddings away and made
        the note be embedded again; found by review)."""
        return await self.collection.find_one({"_id": note_id, "lease_token": token})

    async def complete(
        self,
        note_id: ObjectId,
        token: str,
        *,
        fields: dict[str, Any],
        now: datetime,
        session: AsyncClientSession | None = None,
    ) -> dict[str, Any] | None:
        """Record the new index state and release the lease. The note ends `indexed` unless
        it changed meanwhile (an edit or a recheck set it back to `pending`): then it stays
        pending and is claimable at once. Either way the run succeeded, so the attempts
        start again from 0 (a recheck during the last attempt left a pending note that no
        claim could take; found by review). Returns the updated note, or None if the lease
        was lost."""
        still_current = {"$eq": ["$index_status", "indexing"]}
        return await self.collection.find_one_and_update(
            {"_id": note_id, "lease_token": token},
            [
                {
                    "$set": {
                        **{k: {"$literal": v} for k, v in fields.items()},
                        "index_status": {"$cond": [still_current, "indexed", "pending"]},
                        "index_attempts": 0,
                        "index_error": None,
                        # Left pending by an edit: its own stamp (never later than now),
                        # so the note still reads as a user's write (migration.selection).
                        "next_attempt_at": {
                            "$cond": [still_current, now, {"$min": ["$next_attempt_at", now]}]
                        },
                        "lease_token": None,
                        "lease_expires_at": None,
                        "reserved_until": None,
                        "indexed_at": now,
                    }
                }
            ],
            return_document=ReturnDocument.AFTER,
            session=session,
        )

    async def recheck(self, note_id: ObjectId, now: datetime) -> None:
        """Ask for one more run of the note, due now, whoever holds it: a run holding the
        lease then completes it as `pending` (see `complete`), so the next claim settles
        what a fenced run left behind. A failed or disabled note is left alone. Like an edit,
        it starts the attempts again: the run it asks for is no retry of a failure."""
        await self.collection.update_one(
            {"_id": note_id, "index_status": {"$in": ["indexed", "indexing", "pending"]}},
            {"$set": {"index_status": "pending", "next_attempt_at": now, "index_attempts": 0}},
        )

    async def release(
        self, note_id: ObjectId, token: str, progress: dict[str, float] | None = None
    ) -> bool:
        """Give a claimed note back untouched (shutdown, or a hand-over to another user's
        note): claimable at once, and the interrupted run does not count as an attempt.
        `progress` (embedded, tokens, ms) adds to the note's `index_progress`, which the
        run that completes the note reports in its stats and clears."""
        update = _HAND_BACK
        if progress:
            carried = {
                key: {"$add": [{"$ifNull": [f"$index_progress.{key}", 0]}, value]}
                for key, value in progress.items()
            }
            update = [*_HAND_BACK, {"$set": {"index_progress": carried}}]
        result = await self.collection.update_one({"_id": note_id, "lease_token": token}, update)
        return result.modified_count == 1

    async def release_unconfirmed_claim(
        self, token: str, lease_expires_at: datetime, keep: ObjectId | None = None
    ) -> int:
        """Give back the notes a claim may have taken when its reply never came (the
        database died mid-request), all but `keep`: without this they sat leased to nobody
        for a whole lease. Several, when the driver's retry took another note and lost its
        reply too. Found by the claim's own expiry (the `index_lease` index), fenced by its
        token."""
        query = _under_lease(token, lease_expires_at)
        if keep is not None:
            query["_id"] = {"$ne": keep}
        result = await self.collection.update_many(query, _HAND_BACK)
        return result.modified_count

    async def fail(
        self, note_id: ObjectId, token: str, *, error: str, retry_at: datetime, give_up: bool
    ) -> dict[str, Any] | None:
        """Release the lease after a failed run: back off, or `failed` when out of attempts.
        An edit made during the run wins: the note stays pending and is due now."""
        still_current = {"$eq": ["$index_status", "indexing"]}
        final = "failed" if give_up else "pending"
        return await self.collection.find_one_and_update(
            {"_id": note_id, "lease_token": token},
            [
                {
                    "$set": {
                        "index_status": {"$cond": [still_current, final, "pending"]},
                        "next_attempt_at": {"$cond": [still_current, retry_at, "$next_attempt_at"]},
                        "index_error": {"$literal": error[:2000]},
                        # A note that failed for good is no migration's any more.
                        "reserved_until": {
                            "$cond": [{"$and": [still_current, give_up]}, None, "$reserved_until"]
                        },
                        "lease_token": None,
                        "lease_expires_at": None,
                    }
                }
            ],
            return_document=ReturnDocument.AFTER,
        )

    async def fail_exhausted(self, now: datetime, max_attempts: int) -> int:
        """Notes whose workers kept dying (lease expired, attempts used up) → `failed`."""
        result = await self.collection.update_many(
            {
                "index_status": "indexing",
                "lease_expires_at": {"$lt": now},
                "index_attempts": {"$gte": max_attempts},
            },
            {
                "$set": {
                    "index_status": "failed",
                    "lease_token": None,
                    "lease_expires_at": None,
                    "reserved_until": None,
                    "index_error": "indexing did not finish (worker crashed or timed out) "
                    f"{max_attempts} times",
                }
            },
        )
        return result.modified_count

    async def requeue_stranded(self, max_attempts: int) -> int:
        """Pending notes whose attempts are used up: no claim can take them. No path leaves
        one any more (a recheck or a successful run starts the attempts again), but an older
        release could, so such notes get their attempts back instead of waiting forever."""
        result = await self.collection.update_many(
            {"index_status": "pending", "index_attempts": {"$gte": max_attempts}},
            {"$set": {"index_attempts": 0}},
        )
        return result.modified_count

    async def requeue_stale(
        self, *, chunking_version: str, embedding_model: str, now: datetime
    ) -> int:
        """Indexed notes made with another chunker or embedding model → pending."""
        result = await self.collection.update_many(
            {
                "status": STATUS_QUERY["active"],
                "index_status": {"$in": ["indexed", "disabled"]},
                **_ADDRESSABLE,  # no claim could take them: pending for good
                "$or": [
                    {"chunking_version": {"$ne": chunking_version}},
                    {"embedding_model": {"$ne": embedding_model}},
                    {"index_status": "disabled"},
                ],
            },
            {
                "$set": {
                    "index_status": "pending",
                    "next_attempt_at": now,
                    "index_attempts": 0,
                    "index_error": None,
                }
            },
        )
        return result.modified_count

    async def depth(self) -> tuple[int, int]:
        """(pending or indexing, failed) note counts."""
        pending = await self.collection.count_documents(
            {"index_status": {"$in": ["pending", "indexing"]}, **_ADDRESSABLE}
        )
        failed = await self.collection.count_documents({"index_status": "failed"})
        return pending, failed

    async def get(self, note_id: ObjectId) -> dict[str, Any] | None:
        return await self.collection.find_one({"_id": note_id})

    async def pending_evictions(self, limit: int = 500) -> list[dict[str, Any]]:
        """Notes whose older versions' chunks may not have been deleted yet."""
        cursor = self.collection.find({"evict_pending": True}, {"indexed_version": 1})
        return await cursor.limit(limit).to_list()

    async def failed(self, limit: int = 500) -> list[dict[str, Any]]:
        """Failed notes (id, version, indexed version), for the leftover sweep."""
        cursor = self.collection.find(
            {"index_status": "failed"}, {"version": 1, "indexed_version": 1}
        )
        return await cursor.limit(limit).to_list()

    async def clear_eviction(self, note_id: ObjectId, version: int | None) -> None:
        """Done evicting for `version` (None: the note was trashed since; its removal
        deleted every chunk, so nothing is left to evict)."""
        await self.collection.update_one(
            {"_id": note_id, "indexed_version": version}, {"$unset": {"evict_pending": ""}}
        )

    async def existing_ids(self, note_ids: list[ObjectId]) -> set[ObjectId]:
        cursor = self.collection.find({"_id": {"$in": note_ids}}, {"_id": 1})
        return {doc["_id"] async for doc in cursor}

    async def indexed_since(
        self, since: datetime | None, limit: int = 1000, *, inclusive: bool = False
    ) -> list[dict[str, Any]]:
        """Notes whose index state changed at/after `since`, oldest first (for keeping
        search indexes fresh)."""
        op = "$gte" if inclusive else "$gt"
        query: dict[str, Any] = (
            {"indexed_at": {op: since}} if since else {"indexed_at": {"$ne": None}}
        )
        cursor = self.collection.find(query, {"content_md": 0}).sort("indexed_at", 1).limit(limit)
        return await cursor.to_list()
