"""Worker loops that drain the indexing queue, in the API process (CHUNKING_ASYNC=true, the
default) or in `autonote worker` processes. Any number of loops in any number of processes
share the work safely through the leases in `api.indexing.queue`."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import Any

import structlog
from bson import ObjectId

from api import observability as obs
from api.indexing.generation import served_pin
from api.indexing.lease import evict_flagged
from api.indexing.queue import IndexQueue
from api.indexing.reconciler import Reconciler
from api.indexing.settling import Step, run_until_settled
from api.indexing.types import IndexOutcome, MaintenanceReport
from api.notes.versioning import whole_version
from api.tasks import cancel_and_wait

log = structlog.get_logger(__name__)

MAINTENANCE_EVERY_S = 30.0
ORPHAN_SWEEP_EVERY_S = 600.0


class IndexWorkers:
    """`concurrency` claim-and-index loops plus a maintenance loop."""

    def __init__(
        self,
        reconciler: Reconciler,
        *,
        concurrency: int,
        poll_s: float,
        stop_grace_s: float,
    ) -> None:
        self.reconciler = reconciler
        self.concurrency = concurrency
        self.poll_s = poll_s
        self.stop_grace_s = stop_grace_s
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._loops: list[asyncio.Task[None]] = []
        # `index_now`: runs going on after their write timed out, and how many run at once.
        self._sync_runs: set[asyncio.Task[Any]] = set()
        self._sync_gate = asyncio.Semaphore(max(2, concurrency))
        self._maintainer: asyncio.Task[None] | None = None
        # Set once a maintenance pass (the first includes the orphan sweep) has finished:
        # whoever plants chunks of a missing note on purpose (tests) waits for it, or the
        # startup sweep may delete them under their feet.
        self.maintained = asyncio.Event()

    def wake(self) -> None:
        """A note changed: stop waiting for the next poll."""
        self._wake.set()

    async def start(self) -> None:
        """Re-queue notes made with another chunker/model, then start the loops."""
        await self.requeue_stale()
        self._stop.clear()
        self._loops = [
            asyncio.create_task(self._loop(i), name=f"index-worker-{i}")
            for i in range(self.concurrency)
        ]
        self._maintainer = asyncio.create_task(self._maintenance(), name="index-maintenance")
        log.info(
            "index.workers_started", workers=self.concurrency, worker_id=self.reconciler.worker_id
        )

    async def stop(self) -> None:
        """Stop claiming notes, let the notes being indexed finish (commit and evict their
        old version) within `stop_grace_s`, then cancel what is left. A note cancelled
        mid-run keeps its lease until expiry and is retried then; nothing is lost either
        way, but finishing avoids leaving old chunks for the maintenance sweep."""
        self._stop.set()
        self._wake.set()
        if self._maintainer is not None:
            await cancel_and_wait([self._maintainer])
        unfinished = 0
        running = [*self._loops, *self._sync_runs]
        if running:
            _, pending = await asyncio.wait(running, timeout=self.stop_grace_s)
            unfinished = len(pending)
            await cancel_and_wait(running)
        self._loops, self._maintainer = [], None
        if self.reconciler.switch is not None:
            await self.reconciler.switch.close()
        log.info("index.workers_stopped", cancelled_mid_note=unfinished)

    async def _pause(self, seconds: float) -> None:
        """Sleep, but wake at once when stopping."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)

    async def requeue_stale(self) -> int:
        count = await self.reconciler.queue.requeue_stale(
            chunking_version=self.reconciler.chunker.version,
            embedding_model=self.reconciler.model_key,
            now=datetime.now(UTC),
        )
        if count:
            log.info(
                "index.stale_requeued",
                notes=count,
                chunking_version=self.reconciler.chunker.version,
            )
        return count

    async def _loop(self, n: int) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                outcome = await self.reconciler.run_once()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # e.g. database down: keep the loop alive, back off
                failures += 1
                delay = min(30.0, 0.5 * 2 ** min(failures, 6))
                log.warning(
                    "index.worker_error",
                    worker=n,
                    error=type(exc).__name__,
                    detail=str(exc)[:300],
                    retry_in_s=delay,
                )
                await self._pause(delay)
                continue
            if outcome is None and not self._stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=self.poll_s)
                self._wake.clear()

    async def _maintenance(self) -> None:
        last_orphan_sweep = 0.0
        loop = asyncio.get_running_loop()
        while not self._stop.is_set():
            try:
                await self.maintenance_once(
                    orphans=loop.time() - last_orphan_sweep > ORPHAN_SWEEP_EVERY_S
                )
                if loop.time() - last_orphan_sweep > ORPHAN_SWEEP_EVERY_S:
                    last_orphan_sweep = loop.time()
                self.maintained.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("index.maintenance_error", error=type(exc).__name__)
            await self._pause(MAINTENANCE_EVERY_S)

    async def maintenance_once(self, *, orphans: bool = True) -> MaintenanceReport:
        """Fail notes whose workers kept dying, give stranded pending notes their attempts
        back, publish queue depth, finish evictions; with `orphans`, also drop chunks of
        notes that are gone and uncommitted versions of failed notes."""
        queue = self.reconciler.queue
        max_attempts = self.reconciler.config.max_attempts
        exhausted = await queue.fail_exhausted(datetime.now(UTC), max_attempts)
        stranded = await queue.requeue_stranded(max_attempts)
        if stranded:
            log.warning("index.stranded_requeued", notes=stranded)
        pending, failed = await queue.depth()
        obs.set_queue_depth(pending, failed)
        evicted = 0
        for note in await queue.pending_evictions():
            # A worker died between a swap's commit and deleting the old version.
            evicted += await evict_flagged(queue, self.reconciler.chunks, note)
        switched = 0
        if self.reconciler.switch is not None:  # users whose new index is complete
            switched = await self.reconciler.switch.maintain(sweep=orphans)
        leftovers = removed = 0
        if orphans:  # the rare, whole-collection sweeps: at start-up, then every 10 minutes
            leftovers = await self._delete_leftovers_of_failed_notes()
            chunk_notes = await self.reconciler.chunks.note_ids_with_chunks()
            existing = await queue.existing_ids(chunk_notes)
            missing = [n for n in chunk_notes if n not in existing]
            removed = await self.reconciler.chunks.delete_for_notes(missing)
            if removed:
                log.info("index.orphan_chunks_deleted", chunks=removed, notes=len(missing))
        return MaintenanceReport(
            exhausted=exhausted,
            stranded=stranded,
            pending=pending,
            failed=failed,
            evicted=evicted,
            leftovers=leftovers,
            orphans=removed,
            switched=switched,
        )

    async def _delete_leftovers_of_failed_notes(self) -> int:
        """A run wrote a version and never committed it (its commit failed or was refused),
        then the note failed: nothing else deletes those chunks. Only versions older than
        the note's: an edit may already have a run writing the current one."""
        deleted = 0
        for note in await self.reconciler.queue.failed():
            indexed = note.get("indexed_version")
            deleted += await self.reconciler.chunks.delete_uncommitted(
                note["_id"],
                whole_version(note.get("version")),
                None if indexed is None else int(indexed),
                served_pin(note),  # kept for an older generation's readers
            )
        return deleted

    async def index_now(self, note_id: ObjectId, timeout_s: float) -> IndexOutcome | None:
        """Synchronous mode: index `note_id` before returning (waiting for another worker's
        lease if one is busy with it). Returns after `timeout_s` at the latest (None). At
        the timeout a run that has started finishes in the background (its embeddings are
        kept), while one still waiting for its turn (at most max(2, workers) run at once)
        is dropped and the worker loops take the note.
        """
        loop = asyncio.get_running_loop()
        started = asyncio.Event()
        run = asyncio.create_task(
            self._gated_run(note_id, loop.time() + timeout_s, started), name="index-now"
        )
        try:
            done, _ = await asyncio.wait({run}, timeout=timeout_s)
        except BaseException:  # this request was cancelled
            await self._settle_unfinished(run, started)
            raise
        if done:
            return run.result()
        log.warning("index.sync_timeout", note_id=str(note_id), timeout_s=timeout_s)
        await self._settle_unfinished(run, started)
        return None

    async def _gated_run(
        self, note_id: ObjectId, deadline: float, started: asyncio.Event
    ) -> IndexOutcome | None:
        async with self._sync_gate:
            started.set()
            settling = _IndexNow(self.reconciler.queue, note_id, deadline)
            return await run_until_settled(self.reconciler.run_once, note_id, settling)

    async def _settle_unfinished(self, run: asyncio.Task[Any], started: asyncio.Event) -> None:
        """A sync run its write stopped waiting for: kept if it started (tracked, so `stop`
        waits for it and its failure is logged), else dropped for the worker loops."""
        if run.done():
            return
        if not started.is_set():
            await cancel_and_wait([run])
            self.wake()
            return
        self._sync_runs.add(run)
        run.add_done_callback(self._sync_run_done)

    def _sync_run_done(self, run: asyncio.Task[Any]) -> None:
        self._sync_runs.discard(run)
        if not run.cancelled() and run.exception() is not None:
            log.error("index.sync_run_failed", error=repr(run.exception())[:300])

    async def drain(self, timeout_s: float = 60.0) -> int:
        """Index until nothing is claimable (tests, migrations); returns notes processed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        done = 0
        while loop.time() < deadline:
            outcome = await self.reconciler.run_once()
            if outcome is None:
                return done
            done += outcome.status != "handed_over"
        raise TimeoutError(f"queue not drained within {timeout_s}s ({done} notes indexed)")


class _IndexNow:
    """`index_now`'s rules for `run_until_settled`: stop once a run ends the note, once the
    note is indexed, failed, disabled or gone, once a run failed or the note waits out a
    back-off with nobody holding it, or at `deadline` (the event loop's time); else claim it
    again shortly."""

    def __init__(self, queue: IndexQueue, note_id: ObjectId, deadline: float) -> None:
        self.queue, self.note_id, self.deadline = queue, note_id, deadline
        self.outcome: IndexOutcome | None = None
        self.note: dict[str, Any] | None = None

    async def look(self, outcome: IndexOutcome | None) -> Step[IndexOutcome] | None:
        self.outcome = outcome
        if outcome is not None and outcome.status != "pending":
            return self._stop()
        self.note = await self.queue.get(self.note_id)
        return None

    async def decide(self) -> Step[IndexOutcome]:
        note, outcome = self.note, self.outcome
        if note is None or note.get("index_status") in ("indexed", "failed", "disabled"):
            return self._stop()
        if outcome is not None and outcome.error is not None:
            return self._stop()  # failed attempt, retry scheduled with backoff
        due = note.get("next_attempt_at")
        if due is not None and due > datetime.now(UTC) and note.get("lease_token") is None:
            return self._stop()
        if asyncio.get_running_loop().time() > self.deadline:
            return self._stop()
        return Step(wait_s=0.02)

    async def recover(self, error: Exception) -> bool:
        return False

    def _stop(self) -> Step[IndexOutcome]:
        return Step(stop=True, result=self.outcome)
