"""The indexing queue: queries on the `notes` collection used by the reconciler.

The note document is the queue entry (an outbox that cannot be lost: the write that changes
a note is the write that enqueues it). A worker takes a note by a claim
(`api.indexing.claims`) that sets a lease; edits during indexing set `index_status: pending`
but cannot be claimed while the lease is held, so rapid edits coalesce into one more run on
the latest version. `index_attempts` counts claims, so a note that crashes workers ends
`failed`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bson import ObjectId
from pymongo import ReturnDocument
from pymongo.asynchronous.client_session import AsyncClientSession

from api.indexing.claims import ADDRESSABLE, HAND_BACK, ClaimQueries
from api.indexing.types import Progress
from api.notes.stored import STATUS_QUERY


class IndexQueue(ClaimQueries):
    """Claim (`ClaimQueries`) / heartbeat / complete / fail, each fenced by the lease token;
    the maintenance sweeps' queries and the reads of the queue's state."""

    async def extend_lease(self, note_id: ObjectId, token: str, until: datetime) -> bool:
        result = await self.collection.update_one(
            {"_id": note_id, "lease_token": token}, {"$set": {"lease_expires_at": until}}
        )
        return result.matched_count == 1

    async def holding(self, note_id: ObjectId, token: str) -> dict[str, Any] | None:
        """The note if the run with `token` still holds its lease, else None. The token is
        what fences, as in `complete`: a run whose lease ran out but that nobody took over
        still holds it (and keeps its embeddings)."""
        return await self.collection.find_one({"_id": note_id, "lease_token": token})

    async def complete(
        self,
        note_id: ObjectId,
        token: str,
        *,
        fields: dict[str, Any],
        now: datetime,
        session: AsyncClientSession | None = None,
        computed: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """Record the new index state (`fields`, literal values; `computed`, expressions on
        the note as it is when the commit lands) and release the lease. The note ends
        `indexed` unless it changed meanwhile (an edit or a recheck set it back to
        `pending`): then it stays pending and is claimable at once. Either way the run
        succeeded, so the attempts start again from 0 (else a recheck during the last
        attempt leaves a pending note that no claim can take). Returns the updated note, or
        None if the lease was lost."""
        still_current = {"$eq": ["$index_status", "indexing"]}
        return await self.collection.find_one_and_update(
            {"_id": note_id, "lease_token": token},
            [
                {
                    "$set": {
                        **{k: {"$literal": v} for k, v in fields.items()},
                        **(computed or {}),
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
        self, note_id: ObjectId, token: str, progress: Progress | None = None
    ) -> bool:
        """Give a claimed note back untouched (shutdown, or a hand-over to another user's
        note): claimable at once, and the interrupted run does not count as an attempt.
        `progress` adds to the note's `index_progress`, which the run that completes the
        note reports in its stats and clears."""
        update = HAND_BACK
        if progress is not None:
            carried = {
                key: {"$add": [{"$ifNull": [f"$index_progress.{key}", 0]}, value]}
                for key, value in progress.as_document().items()
            }
            update = [*HAND_BACK, {"$set": {"index_progress": carried}}]
        result = await self.collection.update_one({"_id": note_id, "lease_token": token}, update)
        return result.modified_count == 1

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
        """Pending notes whose attempts are used up: no claim can take them, so they get
        their attempts back instead of waiting forever. (A recheck or a successful run
        starts the attempts again; a database written by an older build may hold some.)"""
        result = await self.collection.update_many(
            {"index_status": "pending", "index_attempts": {"$gte": max_attempts}},
            {"$set": {"index_attempts": 0}},
        )
        return result.modified_count

    async def requeue_stale(
        self, *, chunking_version: str, embedding_model: str, now: datetime
    ) -> int:
        """Indexed notes made with another chunker or embedding model → pending; so are
        failed ones still indexed with another (their user's switch waits for them: a
        restart gives them fresh attempts)."""
        other = {
            "$or": [
                {"chunking_version": {"$ne": chunking_version}},
                {"embedding_model": {"$ne": embedding_model}},
            ]
        }
        result = await self.collection.update_many(
            {
                "status": STATUS_QUERY["active"],
                "index_status": {"$in": ["indexed", "disabled", "failed"]},
                **ADDRESSABLE,  # no claim could take them: pending for good
                "$or": [
                    {"index_status": "indexed", **other},
                    {"index_status": "failed", "indexed_version": {"$ne": None}, **other},
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
            {"index_status": {"$in": ["pending", "indexing"]}, **ADDRESSABLE}
        )
        failed = await self.collection.count_documents({"index_status": "failed"})
        return pending, failed

    async def get(self, note_id: ObjectId) -> dict[str, Any] | None:
        return await self.collection.find_one({"_id": note_id})

    async def pending_evictions(self, limit: int = 500) -> list[dict[str, Any]]:
        """Notes whose older versions' chunks may not have been deleted yet and are due:
        a version kept searchable for a while (`evict_after`) waits until then."""
        due = {"evict_pending": True, "evict_after": {"$not": {"$gt": datetime.now(UTC)}}}
        fields = {"indexed_version": 1, "generation": 1, "served": 1}
        cursor = self.collection.find(due, fields)
        return await cursor.limit(limit).to_list()

    async def failed(self, limit: int = 500) -> list[dict[str, Any]]:
        """Failed notes (id, version, indexed version), for the leftover sweep."""
        cursor = self.collection.find(
            {"index_status": "failed"}, {"version": 1, "indexed_version": 1, "served": 1}
        )
        return await cursor.limit(limit).to_list()

    async def clear_eviction(self, note_id: ObjectId, version: int | None) -> None:
        """Done evicting for `version` (None: the note was trashed since; its removal
        deleted every chunk, so nothing is left to evict)."""
        await self.collection.update_one(
            {"_id": note_id, "indexed_version": version},
            {"$unset": {"evict_pending": "", "evict_after": "", "previous_indexed_version": ""}},
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
