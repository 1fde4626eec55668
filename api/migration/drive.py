"""Driving one note to a final state: the verdict on its state after a run that did not end
it (`settle`, pure), and the migration's rules for the per-note loop it shares with the
synchronous write path (`NoteDrive`, for `api.indexing.settling.run_until_settled`).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import Any, Protocol, cast

import structlog
from bson import ObjectId
from pymongo.errors import PyMongoError

from api.db.client import is_unavailable
from api.indexing.reconciler import Reconciler
from api.indexing.settling import Step
from api.indexing.types import IndexOutcome
from api.migration.repository import MigrationNotes
from api.migration.selection import users_write_waiting
from api.migration.types import FinalStatus, NoteResult, RunWork, Verdict
from api.notes.stored import note_status

log = structlog.get_logger(__name__)

# How long the per-note loop leaves a user's write to the API's workers (which poll every
# AUTONOTE_INDEX_POLL_S, 0.5 s, and are woken by in-process writes) before taking it itself.
WORKERS_FIRST_S = 1.0
MAX_CLAIM_RETRIES = 100
MAX_DB_ERRORS = 5  # database blips in a row a note's loop waits out; then the run ends


def settle(note: dict[str, Any] | None, now: datetime, max_attempts: int) -> Verdict:
    """Classify a note's state after a run_once that did not end it.

    Final: indexed (by us earlier or by another worker), failed, or skipped (deleted,
    trashed, indexing disabled). Otherwise wait for a lease or a retry time, retry at once,
    or requeue a note whose queue fields are incomplete (so no claim could ever match it).
    """
    if note is None:
        return Verdict("skipped", detail="deleted")
    if note_status(note) != "active":
        return Verdict("skipped", detail="trashed")
    status = note.get("index_status")
    if status == "indexed":
        return Verdict("indexed")
    if status == "failed":
        return Verdict("failed", detail=note.get("index_error") or "failed")
    if status == "disabled":
        return Verdict("skipped", detail="indexing disabled")
    if status == "indexing":
        return _settle_indexing(note, now, max_attempts)
    if status == "pending" and _queued(note):
        return _settle_pending(note, now, max_attempts)
    return Verdict("requeue", detail=f"index_status={status!r}")


def _queued(note: dict[str, Any]) -> bool:
    """The queue fields a claim matches on are there."""
    return note.get("index_attempts") is not None and note.get("next_attempt_at") is not None


def _lease_wait(note: dict[str, Any], now: datetime) -> Verdict | None:
    """Wait for a live lease to end; None when there is none."""
    lease_until = note.get("lease_expires_at")
    if lease_until is not None and lease_until > now:
        return Verdict("wait", wait_s=(lease_until - now).total_seconds())
    return None


def _settle_indexing(note: dict[str, Any], now: datetime, max_attempts: int) -> Verdict:
    """A note some run holds, or held when its worker died."""
    leased = _lease_wait(note, now)
    if leased is not None:
        return leased
    attempts = note.get("index_attempts")
    if attempts is not None and attempts >= max_attempts:
        return Verdict("failed", detail="indexing did not finish (worker died)")
    return Verdict("retry")


def _settle_pending(note: dict[str, Any], now: datetime, max_attempts: int) -> Verdict:
    """A queued note: out of attempts, under a lease, backing off, or claimable."""
    if note["index_attempts"] >= max_attempts:
        return Verdict("requeue", detail="attempts exhausted")
    leased = _lease_wait(note, now)
    if leased is not None:
        return leased
    due = note["next_attempt_at"]
    if due > now:
        return Verdict("wait", wait_s=(due - now).total_seconds())
    if users_write_waiting(note, now):
        left = _workers_turn_left(note, due, now)
        if left > 0:
            return Verdict("hold", wait_s=left, detail="a user's write: workers first")
    return Verdict("retry")


def _workers_turn_left(note: dict[str, Any], due: datetime, now: datetime) -> float:
    """Seconds left of the workers' turn at a user's write (so the edit does not wait for
    the migration's rate limiter, unless no worker takes it), counted from when the note
    became claimable: the run's end (`indexed_at`) or the write."""
    ended = note.get("indexed_at")
    since = min(max(due, ended) if isinstance(ended, datetime) else due, now)
    return WORKERS_FIRST_S - (now - since).total_seconds()


class Run(Protocol):
    """What `NoteDrive` uses of the migration run (`MigrationRunner`)."""

    reconciler: Reconciler
    notes: MigrationNotes
    poll_s: float
    max_requeues: int

    async def enqueue(self, ids: list[ObjectId]) -> int: ...

    def check_config(self, note_id: ObjectId, state: dict[str, Any]) -> None: ...


class NoteDrive:
    """The migration's rules for one note: run it until it is indexed, failed or gone,
    waiting out other workers' leases and the reconciler's retry back-off, and database
    blips. Not `patient`: stop (result None) instead of waiting longer than `poll_s`."""

    def __init__(self, runner: Run, note_id: ObjectId, *, patient: bool) -> None:
        self.runner, self.note_id, self.patient = runner, note_id, patient
        self.max_attempts = runner.reconciler.config.max_attempts
        self.work = RunWork()
        self.state: dict[str, Any] | None = None
        self.requeues = self.retries = self.db_errors = 0

    async def look(self, outcome: IndexOutcome | None) -> Step[NoteResult] | None:
        if outcome is not None and outcome.stats is not None:
            self.work.add(outcome.stats)
        if outcome is not None and outcome.status in ("indexed", "failed"):
            return Step(stop=True, result=await self._ran_to_the_end(outcome))
        self.state = await self.runner.notes.state(self.note_id)
        return None

    async def recover(self, error: Exception) -> bool:
        """A database blip must not fail a note (nothing about the note is wrong); a
        persistent outage ends the run (a rerun resumes)."""
        if not is_unavailable(error) or self.db_errors >= MAX_DB_ERRORS:
            return False
        self.db_errors += 1
        log.warning("migration.database_retry", attempt=self.db_errors, error=str(error)[:200])
        await asyncio.sleep(min(10.0, 0.5 * 2**self.db_errors))
        return True

    async def decide(self) -> Step[NoteResult]:
        verdict = settle(self.state, datetime.now(UTC), self.max_attempts)
        if verdict.final:
            return Step(stop=True, result=await self._settled(verdict))
        if verdict.kind == "retry":
            self.retries += 1
            if self.retries > MAX_CLAIM_RETRIES:
                # Claimable by our reading, yet never claimed: rewrite its queue fields.
                verdict, self.retries = Verdict("requeue", detail="not claimable"), 0
        if verdict.kind == "requeue":
            return await self._requeue(verdict)
        return self._wait(verdict)

    def _wait(self, verdict: Verdict) -> Step[NoteResult]:
        poll_s = self.runner.poll_s
        if verdict.kind == "retry":  # claimable now; another claimer may have won
            return Step(wait_s=0.02)
        if verdict.kind == "wait" and not self.patient and verdict.wait_s > poll_s:
            return Step(stop=True)
        # Poll at least every `poll_s`: an edit or another worker may end it sooner. A
        # user's write (hold) is only looked at again: a worker may take it meanwhile.
        wait_s = min(max(verdict.wait_s, 0.02), poll_s)
        return Step(wait_s=wait_s, claim=verdict.kind != "hold")

    async def _requeue(self, verdict: Verdict) -> Step[NoteResult]:
        if self.requeues >= self.runner.max_requeues:
            detail = f"could not enqueue ({verdict.detail})"
            return Step(stop=True, result=self._result("failed", detail=detail))
        self.requeues += 1
        await self.runner.enqueue([self.note_id])
        return Step()

    async def _settled(self, verdict: Verdict) -> NoteResult:
        """The result of a final verdict on the note's state."""
        state = self.state or {}
        if verdict.kind == "indexed" and self.state is not None:
            self.runner.check_config(self.note_id, self.state)
        if verdict.kind == "failed" and state.get("index_status") == "indexing":
            # Its runs kept dying: say so on the note, as the workers' sweep would (if this
            # write fails, the sweep still will).
            with contextlib.suppress(PyMongoError):
                await self.runner.reconciler.queue.fail_exhausted(
                    datetime.now(UTC), self.max_attempts
                )
        return self._result(
            cast(FinalStatus, verdict.kind),
            chunks=int(state.get("chunk_count") or 0),
            by_other=verdict.kind == "indexed",
            detail=verdict.detail,
        )

    async def _ran_to_the_end(self, outcome: IndexOutcome) -> NoteResult:
        """The result of a run that ended the note (indexed or failed)."""
        if outcome.status == "failed":
            return self._result("failed", detail=outcome.error)
        chunks = outcome.stats.chunks if outcome.stats else 0
        if chunks == 0:
            # Zero chunks is also what indexing a note trashed meanwhile produces.
            state = await self.runner.notes.state(self.note_id)
            if state is None or note_status(state) != "active":
                detail = "deleted" if state is None else "trashed"
                return self._result("skipped", detail=detail)
        return self._result("indexed", chunks=chunks)

    def _result(self, status: FinalStatus, **fields: Any) -> NoteResult:
        work = self.work
        return NoteResult(
            self.note_id,
            status,
            embedded=work.embedded,
            reused=work.reused,
            tokens_embedded=work.tokens_embedded,
            **fields,
        )
