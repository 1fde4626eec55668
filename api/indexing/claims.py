"""How a worker takes a note off the indexing queue: the claim filters (due, dead, reserved)
and the atomic claims; `IndexQueue` (`api.indexing.queue`) adds the lease and state writes.

A claim is one `find_one_and_update` that sets a lease (`lease_token`, `lease_expires_at`)
and counts an attempt. A note under a live lease cannot be claimed; an expired lease (a
worker died) can. A migration reserves the notes it enqueues (`reserved_until`): claims of
"the next due note" pass them over, a claim naming a note does not.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from bson import ObjectId
from pymongo import ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase


def _unreserved(now: datetime) -> dict[str, Any]:
    """No live migration reservation (missing, null, or run out)."""
    return {"$or": [{"reserved_until": None}, {"reserved_until": {"$lte": now}}]}


# Only notes the API can address are indexed (a note whose `_id` is not an ObjectId could
# not be found by search); the migration lists those notes as failed instead.
ADDRESSABLE: dict[str, Any] = {"_id": {"$type": "objectId"}}


def _due(now: datetime, *, reserved_ok: bool = False) -> dict[str, Any]:
    """Queued, due, nobody holds a live lease on it and (unless `reserved_ok`) no migration
    has reserved it."""
    free = {"$or": [{"lease_expires_at": None}, {"lease_expires_at": {"$lt": now}}]}
    query: dict[str, Any] = {
        "index_status": "pending",
        "next_attempt_at": {"$lte": now},
        **ADDRESSABLE,
    }
    query["$and"] = [free] if reserved_ok else [free, _unreserved(now)]
    return query


def _dead(now: datetime, *, reserved_ok: bool = False) -> dict[str, Any]:
    """A worker died mid-run: its lease ran out while the note said "indexing". A dead
    migration's note waits for its reservation to run out too (a rerun claims it by id)."""
    query: dict[str, Any] = {
        "index_status": "indexing",
        "lease_expires_at": {"$lt": now},
        **ADDRESSABLE,
    }
    if not reserved_ok:
        query["$and"] = [_unreserved(now)]
    return query


# A run's note handed back untouched: claimable at once, and not counted as an attempt.
HAND_BACK = [
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


class ClaimQueries:
    """The claims on `notes`, and the hand-back of a claim whose reply was lost."""

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

    async def claim_stale(
        self, *, token: str, now: datetime, lease_s: float, max_attempts: int
    ) -> dict[str, Any] | None:
        """Atomically take a note whose worker died mid-run (lease expired while
        `indexing`), the longest dead first."""
        query = {**_dead(now), "index_attempts": {"$lt": max_attempts}}
        return await self._take(
            query, token=token, now=now, lease_s=lease_s, sort=[("lease_expires_at", 1)]
        )

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
        # note, the first one goes back (else it sits under a lease nobody holds for the
        # whole lease). One indexed lookup on `index_lease`.
        if taken is None:
            return await self.collection.find_one(_under_lease(token, expires))
        await self.release_unconfirmed_claim(token, expires, keep=taken["_id"])
        return taken

    async def release_unconfirmed_claim(
        self, token: str, lease_expires_at: datetime, keep: ObjectId | None = None
    ) -> int:
        """Give back the notes a claim may have taken when its reply never came (the
        database died mid-request), all but `keep`: else they sit leased to nobody for a
        whole lease. Several, when the driver's retry took another note and lost its reply
        too. Looked up by the claim's own expiry (the `index_lease` index), fenced by its
        token."""
        query = _under_lease(token, lease_expires_at)
        if keep is not None:
            query["_id"] = {"$ne": keep}
        result = await self.collection.update_many(query, HAND_BACK)
        return result.modified_count

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
