"""The integrity checker: one streaming pass over `notes` and `note_chunks`, then a
confirmation pass over what looked wrong.

The scan merges two server-sorted cursors (notes by `_id`, chunks by `note_id`), so it holds
one note's chunks at a time. The database is live while it runs: a note may be edited, or a
worker may flip its indexed version, between our read of the note and our read of its
chunks. Everything the scan flags is therefore confirmed from fresh reads: the note, its
chunks, then the note again, judged only when both reads of the note agree (otherwise read
again; a note that keeps changing is counted as unsettled, not judged). After a short settle
delay it is confirmed once more, and only what both confirmations found (the same kind, the
same chunks) is reported or repaired.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import structlog
from pymongo.asynchronous.database import AsyncDatabase

from api.integrity.report import CheckReport, RepairResult
from api.integrity.repository import IntegrityQueries
from api.integrity.rules import (
    Expectations,
    Finding,
    check_missing_note,
    check_note,
    id_sort_key,
    persistent,
)

log = structlog.get_logger(__name__)

_CONFIRM_BATCH = 200
_CONFIRM_READS = 4  # attempts at a stable (note, chunks, same note) read per confirmation


async def _groups(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[list[dict[str, Any]]]:
    """Consecutive chunks with the same `note_id` (the cursor is sorted by it)."""
    group: list[dict[str, Any]] = []
    async for chunk in chunks:
        if group and chunk["note_id"] != group[0]["note_id"]:
            yield group
            group = []
        group.append(chunk)
    if group:
        yield group


class IntegrityChecker:
    """`run()` checks; `repair(report)` re-queues and deletes what the report found."""

    def __init__(
        self,
        db: AsyncDatabase,
        expect: Expectations,
        *,
        batch_size: int = 200,
        settle_s: float = 1.0,
    ) -> None:
        self.db = db
        self.expect = expect
        self.queries = IntegrityQueries(db, batch_size=batch_size)
        self.settle_s = settle_s

    async def run(self) -> CheckReport:
        """Scan everything, confirm the suspects, return the report (read-only)."""
        started = time.perf_counter()
        report = CheckReport(database=self.db.name, model_key=self.expect.model_key)
        suspects = await self._scan(report)
        report.suspects = len(suspects)
        report.unique_index = await self.queries.has_unique_chunk_index()
        if suspects:
            findings = await self._confirm(suspects, report)
            if findings and self.settle_s > 0:
                # Once more after a pause: a note caught between a worker's commit and its
                # eviction of the old version looks wrong for a few milliseconds.
                await asyncio.sleep(self.settle_s)
                again = await self._confirm(
                    sorted({f.note_id for f in findings}, key=id_sort_key), report
                )
                findings = persistent(findings, again)
            report.findings = findings
        report.duration_s = time.perf_counter() - started
        log.info(
            "integrity.checked",
            notes=report.notes_scanned,
            chunks=report.chunks_scanned,
            suspects=report.suspects,
            violations=len(report.violations),
            unsettled=report.unsettled,
            duration_s=round(report.duration_s, 3),
        )
        return report

    async def _scan(self, report: CheckReport) -> list[Any]:
        """The merge of both cursors; returns the ids of notes with any finding."""
        suspects: list[Any] = []
        groups = _groups(self._counted_chunks(report))
        group = await anext(groups, None)
        async for note in self.queries.iter_notes():
            report.notes_scanned += 1
            key = id_sort_key(note["_id"])
            while group is not None and id_sort_key(group[0]["note_id"]) < key:
                suspects.append(group[0]["note_id"])  # chunks of a note that does not exist
                group = await anext(groups, None)
            mine: list[dict[str, Any]] = []
            if group is not None and group[0]["note_id"] == note["_id"]:
                mine = group
                group = await anext(groups, None)
            if check_note(note, mine, self.expect):
                suspects.append(note["_id"])
        while group is not None:
            suspects.append(group[0]["note_id"])
            group = await anext(groups, None)
        return suspects

    async def _counted_chunks(self, report: CheckReport) -> AsyncIterator[dict[str, Any]]:
        async for chunk in self.queries.iter_chunks():
            report.chunks_scanned += 1
            yield chunk

    async def _confirm(self, note_ids: list[Any], report: CheckReport) -> list[Finding]:
        """Judge the given notes again from fresh reads of each note and its chunks."""
        findings: list[Finding] = []
        for start in range(0, len(note_ids), _CONFIRM_BATCH):
            batch = note_ids[start : start + _CONFIRM_BATCH]
            notes = await self.queries.notes_by_id(batch)
            for _ in range(_CONFIRM_READS):
                batch, notes = await self._judge_stable(batch, notes, findings)
                if not batch:
                    break
            else:
                report.unsettled += len(batch)
                log.warning("integrity.unsettled", notes=len(batch), example=str(batch[0]))
        return findings

    async def _judge_stable(
        self, batch: list[Any], notes: dict[Any, dict[str, Any]], findings: list[Finding]
    ) -> tuple[list[Any], dict[Any, dict[str, Any]]]:
        """Given the notes as just read, read their chunks, then the notes again; judge every
        note that did not change in between (its chunks were read in one state of it).
        Returns the others with their latest reads, the start of the next attempt. Without
        this, chunks of an edit committed after the note was read look like the chunks of a
        dead version."""
        chunks = await self.queries.chunks_of(batch)
        after = await self.queries.notes_by_id(batch)
        changed: list[Any] = []
        for note_id in batch:
            note = notes.get(note_id)
            if note != after.get(note_id):
                changed.append(note_id)
                continue
            mine = chunks.get(note_id, [])
            if note is not None:
                findings.extend(check_note(note, mine, self.expect))
            elif mine:
                findings.append(check_missing_note(note_id, mine))
        return changed, {n: after[n] for n in changed if n in after}

    async def repair(self, report: CheckReport, *, retry_failed: bool = False) -> RepairResult:
        """Apply the repairs the findings call for: delete orphan and bad chunks first, then
        re-queue notes (pending, fresh attempts) so the reconciler rebuilds what is missing.
        Never touches a note's content. `retry_failed` also re-queues `failed` notes."""
        delete: set[Any] = set()
        requeue: set[Any] = set()
        missing: set[Any] = set()
        for f in report.findings:
            delete.update(f.delete_ids)
            if f.delete_note_chunks:
                missing.add(f.note_id)
            if (f.requeue and f.is_violation) or (retry_failed and f.kind == "failed"):
                requeue.add(f.note_id)
        result = RepairResult()
        ids = sorted(delete, key=id_sort_key)
        for start in range(0, len(ids), 1000):
            result.chunks_deleted += await self.queries.delete_chunks(ids[start : start + 1000])
        gone = sorted(missing, key=id_sort_key)
        for start in range(0, len(gone), 500):
            result.chunks_deleted += await self.queries.delete_chunks_of_missing_notes(
                gone[start : start + 500]
            )
        notes = sorted(requeue, key=id_sort_key)
        now = datetime.now(UTC)
        for start in range(0, len(notes), 500):
            result.notes_requeued += await self.queries.requeue_notes(
                notes[start : start + 500], now
            )
        report.repair = result
        log.info(
            "integrity.repaired",
            notes_requeued=result.notes_requeued,
            chunks_deleted=result.chunks_deleted,
        )
        return result
