"""The migration run: select → enqueue a batch → drive each note to a final state through
`Reconciler.run_once(note_id)` — the API's own indexing code path, leases and all.

Safe to kill at any point and run again: selection is a query on the notes' own state,
enqueueing only fills missing fields, indexing is the reconciler's lease-fenced swap, and an
edit during the run re-queues its note (a final catch-up pass indexes it). The notes it
enqueues are reserved for it (`reserved_until`, renewed while it lives, ended when it stops)
so the API's workers pass them over. See docs/operations.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from bson import ObjectId

from api.indexing.reconciler import Reconciler
from api.indexing.settling import run_until_settled
from api.migration.drive import NoteDrive
from api.migration.repository import MigrationNotes
from api.migration.selection import Selection, unaddressable_detail
from api.migration.types import MigrationStats, NoteResult
from api.tasks import cancel_and_wait

log = structlog.get_logger(__name__)

# How long the run's reservation of a note lasts unless renewed (every third of it): how
# long the notes of a killed run wait before any worker may take them.
RESERVE_S = 60.0


class MigrationRunner:
    """Drives the selected notes to `indexed` with `concurrency` loops, `batch_size` notes
    enqueued at a time. `on_update(stats)` is called after every note (progress)."""

    def __init__(
        self,
        reconciler: Reconciler,
        notes: MigrationNotes,
        selection: Selection,
        *,
        batch_size: int = 200,
        concurrency: int = 4,
        poll_s: float = 1.0,
        catch_up_rounds: int = 3,
        max_requeues: int = 3,
        reserve_s: float | None = RESERVE_S,
        on_start: Callable[[int], None] | None = None,
        on_update: Callable[[MigrationStats], None] | None = None,
    ) -> None:
        if batch_size < 1 or concurrency < 1:
            raise ValueError("batch_size and concurrency must be >= 1")
        if reserve_s is not None and reserve_s <= 0:
            raise ValueError("reserve_s must be > 0 (None: no reservations)")
        self.reconciler = reconciler
        self.notes = notes
        self.selection = selection
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.poll_s = poll_s
        self.catch_up_rounds = catch_up_rounds
        self.max_requeues = max_requeues
        self.reserve_s = reserve_s  # None: enqueue for any worker (benchmarks' baseline)
        self.on_start = on_start
        self.on_update = on_update
        self.stats = MigrationStats()
        self.tasks: set[asyncio.Task[None]] = set()  # the running note loops
        self._last_id: Any = None
        self._reserved: set[ObjectId] = set()  # enqueued by this run, not yet final

    async def run(self) -> MigrationStats:
        """Migrate everything selected, then catch up on notes edited meanwhile. Cancelling
        the task stops cleanly: claimed notes keep their lease until it expires, and the
        notes still reserved go back to every worker."""
        renewing = asyncio.create_task(self._keep_reservations())
        try:
            return await self._run()
        finally:
            await cancel_and_wait([renewing])
            with contextlib.suppress(Exception):
                await self.end_reservations()

    async def end_reservations(self) -> int:
        """Give the notes this run reserved and did not finish back to every worker (called
        when the run stops; again by the CLI after an interrupt cut the first call short)."""
        ids = list(self._reserved)
        ended = await self.notes.end_reservations(ids)
        self._reserved.difference_update(ids)
        return ended

    async def _keep_reservations(self) -> None:
        """Renew the reservations every third of `reserve_s`. A failed renewal is tried
        again at the next one, which also renews what ran out meanwhile; while they are out,
        workers may take the notes, which is safe (the per-note loop claims by id
        regardless)."""
        if self.reserve_s is None:
            return
        interval = self.reserve_s / 3
        while True:
            await asyncio.sleep(interval)
            try:
                await self.notes.renew_reservations(
                    list(self._reserved), datetime.now(UTC) + timedelta(seconds=self.reserve_s)
                )
            except Exception as exc:
                log.warning("migration.reservation_retry", error=str(exc)[:200])

    async def enqueue(self, ids: list[ObjectId]) -> int:
        """Enqueue `ids`, reserved for this run (tracked so they are renewed and released)."""
        now = datetime.now(UTC)
        until = None
        if self.reserve_s is not None:
            self._reserved.update(ids)
            until = now + timedelta(seconds=self.reserve_s)
        return await self.notes.enqueue(ids, self.selection, now, reserve_until=until)

    async def _run(self) -> MigrationStats:
        started_at = datetime.now(UTC)
        if self.selection.limit is None:  # a `--limit` trial touches only what it indexes
            self.stats.normalized = await self.notes.normalize_shapes(
                self.selection, started_at, self.batch_size
            )
        total = await self.notes.count(self.selection)
        if self.selection.limit is not None:
            total = min(total, self.selection.limit)
        odd = await self.notes.unaddressable(self.selection)
        for note_id in odd:
            self.stats.record(NoteResult(note_id, "failed", detail=unaddressable_detail(note_id)))
        self.stats.selected = total + len(odd)
        bounds = await self.notes.id_range(self.selection)
        log.info(
            "migration.started",
            selected=total,
            batch_size=self.batch_size,
            concurrency=self.concurrency,
            worker_id=self.reconciler.worker_id,
        )
        if self.on_start is not None:
            # The unaddressable notes count as done already, so they count in the total.
            self.on_start(self.stats.selected)
        if bounds is None:
            return self.stats
        # Notes another worker holds (e.g. a killed run's leases) are set aside instead of
        # blocking a loop, and finished after everything else.
        deferred: list[ObjectId] = []
        await self._process(self._selected_batches(bounds[1]), catch_up=False, deferred=deferred)
        if deferred:
            log.info("migration.deferred", notes=len(deferred))
            await self._process(_once(deferred), catch_up=False)
        self.stats.left_selection = max(0, self.stats.selected - self.stats.done)
        self.stats.joined_selection = max(0, self.stats.done - self.stats.selected)
        if self._last_id is not None:
            await self._catch_up(started_at, bounds[0], self._last_id)
        return self.stats

    async def _selected_batches(self, upto: Any) -> AsyncIterator[list[ObjectId]]:
        after: Any = None
        remaining = self.selection.limit
        while remaining is None or remaining > 0:
            size = self.batch_size if remaining is None else min(self.batch_size, remaining)
            docs = await self.notes.page(self.selection, after=after, upto=upto, limit=size)
            if not docs:
                return
            ids = [d["_id"] for d in docs]
            after = self._last_id = ids[-1]
            if remaining is not None:
                remaining -= len(ids)
            yield ids

    async def _catch_up(self, started_at: datetime, first_id: Any, last_id: Any) -> None:
        for _ in range(self.catch_up_rounds):
            ids = await self.notes.edited_since(
                self.selection,
                started_at=started_at,
                first_id=first_id,
                last_id=last_id,
                limit=self.batch_size * 10,
            )
            if not ids:
                return
            log.info("migration.catch_up", notes=len(ids))
            await self._process(_once(ids), catch_up=True)

    async def _process(
        self,
        batches: AsyncIterator[list[ObjectId]],
        *,
        catch_up: bool,
        deferred: list[ObjectId] | None = None,
    ) -> None:
        """Enqueue each batch, then drive its notes with `concurrency` loops. With a
        `deferred` list, notes that would make a loop wait go there instead."""
        # A bounded hand-off: the next batch is enqueued in the database only when the
        # loops have taken most of the previous one, so the queue never holds the world.
        queue: asyncio.Queue[ObjectId | None] = asyncio.Queue(maxsize=self.batch_size)
        async with asyncio.TaskGroup() as group:
            for _ in range(self.concurrency):
                task = group.create_task(self._consume(queue, catch_up, deferred))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
            async for ids in batches:
                enqueued = await self.enqueue(ids)
                log.debug("migration.batch_enqueued", notes=len(ids), enqueued=enqueued)
                for note_id in ids:
                    await queue.put(note_id)
            for _ in range(self.concurrency):
                await queue.put(None)

    async def _consume(
        self,
        queue: asyncio.Queue[ObjectId | None],
        catch_up: bool,
        deferred: list[ObjectId] | None,
    ) -> None:
        while (note_id := await queue.get()) is not None:
            result = await self.drive(note_id, patient=deferred is None)
            if result is None:
                assert deferred is not None
                deferred.append(note_id)
                continue
            self._reserved.discard(note_id)
            self.stats.record(result, catch_up=catch_up)
            if result.status == "failed":
                log.warning("migration.note_failed", note_id=str(note_id), error=result.detail)
            if self.on_update is not None:
                self.on_update(self.stats)

    async def drive(self, note_id: ObjectId, *, patient: bool = True) -> NoteResult | None:
        """Run the reconciler on `note_id` until the note is indexed, failed or gone,
        waiting out other workers' leases and the reconciler's retry back-off. Not
        `patient`: return None instead of waiting longer than `poll_s`."""
        settling = NoteDrive(self, note_id, patient=patient)
        return await run_until_settled(self.reconciler.run_once, note_id, settling)

    def check_config(self, note_id: ObjectId, state: dict[str, Any]) -> None:
        if (state.get("chunking_version"), state.get("embedding_model")) != (
            self.selection.chunking_version,
            self.selection.embedding_model,
        ):
            log.warning(
                "migration.indexed_with_other_config",
                note_id=str(note_id),
                chunking_version=state.get("chunking_version"),
                embedding_model=state.get("embedding_model"),
                hint="another worker runs with different chunking/embedding settings",
            )


async def _once(ids: list[ObjectId]) -> AsyncIterator[list[ObjectId]]:
    yield ids
