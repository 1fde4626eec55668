"""Keeping a run's lease alive, recording a failed run, and retrying database writes a run
must not lose.

Both are about a run outliving a database blip: the heartbeat must survive one, or the lease
runs out mid-run and another worker redoes the note; a failure record or an eviction must be
retried, or the note sits unclaimable (or keeps stale chunks) until a sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from bson import ObjectId
from pymongo.errors import PyMongoError

from api import observability as obs
from api.chunk_store.repository import ChunksRepository
from api.db.client import is_unavailable
from api.indexing.generation import note_generation, served_pin
from api.indexing.queue import IndexQueue
from api.indexing.records import backoff_seconds
from api.indexing.types import Progress, ReconcilerConfig
from connectors.embeddings.base import EmbeddingError

log = structlog.get_logger(__name__)


async def keep_lease(queue: IndexQueue, note_id: ObjectId, token: str, lease_s: float) -> None:
    """Extend the lease every third of it until the run ends (cancel) or the lease is lost.
    A failed extension is retried soon, while the lease still runs: a database blip must
    not let the lease run out mid-run (another worker would embed the whole note again)."""
    interval = lease_s / 3
    delay = interval
    while True:
        await asyncio.sleep(delay)
        until = datetime.now(UTC) + timedelta(seconds=lease_s)
        try:
            held = await queue.extend_lease(note_id, token, until)
        except Exception as exc:
            log.warning(
                "note.heartbeat_retry",
                error=type(exc).__name__,
                exc_info=not isinstance(exc, PyMongoError),
            )
            delay = min(interval, 1.0)
            continue
        if not held:
            return
        delay = interval


async def while_unavailable(event: str, op: Callable[[], Awaitable[Any]], budget_s: float) -> None:
    """Run `op`, retrying with back-off while the database is unavailable, for at most
    `budget_s` (one lease)."""
    deadline = time.monotonic() + budget_s
    delay = 0.25
    while True:
        try:
            await op()
            return
        except PyMongoError as exc:
            if not is_unavailable(exc) or time.monotonic() + delay > deadline:
                raise
            log.info(event, retry_in_s=delay, error=type(exc).__name__)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 5.0)


async def evict_flagged(queue: IndexQueue, chunks: ChunksRepository, note: dict[str, Any]) -> int:
    """Finish the eviction a commit flagged on `note` (a document with its `_id`,
    `indexed_version`, `generation` and `served`): delete the versions older than the
    indexed one and other generations' chunks up to it, except what the note keeps for an
    older generation's readers, then clear the flag; returns the chunks deleted. Safe
    whoever holds the note now: a version older than the indexed one is never live
    again."""
    if note.get("indexed_version") is None:
        # Trashed since: its removal deleted every chunk. Left set, such flags filled the
        # 500 the sweep reads and starved real evictions.
        await queue.clear_eviction(note["_id"], None)
        return 0
    version = int(note["indexed_version"])
    pin = served_pin(note)
    if pin is None:
        deleted = await chunks.delete_older_versions(note["_id"], version)
    else:  # never what the note keeps for an older generation's readers
        deleted = await chunks.delete_older_versions(note["_id"], version, pin)
    generation = note_generation(note)
    if generation is not None:
        deleted += await chunks.delete_other_generations(note["_id"], generation, version, pin)
    await queue.clear_eviction(note["_id"], version)
    return deleted


async def finish_eviction(
    queue: IndexQueue,
    chunks: ChunksRepository,
    note_id: ObjectId,
    note: dict[str, Any] | None = None,
) -> int:
    """`evict_flagged` for a note still flagged `evict_pending` (`note`: its document when
    the caller has just read it); returns the chunks deleted.

    For a run whose commit may have been applied with its reply lost (the database died
    right after applying it): the run saw an error, or the driver's retry on the restarted
    server matched nothing and read as refused. Either way it never evicted; without this
    the old chunks wait for the maintenance sweep
    (tests/faults/test_reply_lost.py). A failure here is left to the sweep."""
    try:
        if note is None:
            note = await queue.get(note_id)
        if note is None or not note.get("evict_pending"):
            return 0
        deleted = await evict_flagged(queue, chunks, note)
    except PyMongoError as exc:
        log.info("note.eviction_left_to_sweep", error=type(exc).__name__)
        return 0
    log.info("note.eviction_finished", version=note.get("indexed_version"), chunks=deleted)
    return deleted


async def hand_back(
    queue: IndexQueue,
    note_id: ObjectId,
    token: str,
    progress: Progress,
    budget_s: float,
) -> None:
    """Give back a note whose run handed its worker over: due at once, not an attempt, its
    work so far recorded. Retried while the database is down (else the note stays
    `indexing` for a whole lease, and the run counts as an attempt); if it never comes
    back, the lease runs out instead."""
    with contextlib.suppress(PyMongoError):
        await while_unavailable(
            "note.hand_over_retry", lambda: queue.release(note_id, token, progress), budget_s
        )


async def claim_or_hand_back(
    queue: IndexQueue,
    claim: Awaitable[dict[str, Any] | None],
    token: str,
    lease_expires_at: datetime,
    budget_s: float,
) -> dict[str, Any] | None:
    """Await `claim`. If the database becomes unavailable mid-claim, the claim may have been
    applied with its reply lost: the note then says `indexing` under a lease nobody holds,
    and no worker can take it for a whole lease. Hand such a note back, retrying while the
    database is down, then raise the claim's error."""
    try:
        return await claim
    except asyncio.CancelledError:
        # Stopped mid-claim (Ctrl-C of a migration, shutdown): the claim may have been
        # applied; handed back, its note (and an edit to it) need not wait out the lease.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                asyncio.shield(queue.release_unconfirmed_claim(token, lease_expires_at)), 2
            )
        raise
    except PyMongoError as exc:
        if is_unavailable(exc):
            await while_unavailable(
                "note.claim_hand_back_retry",
                lambda: queue.release_unconfirmed_claim(token, lease_expires_at),
                budget_s,
            )
        raise


async def record_failure(
    queue: IndexQueue, config: ReconcilerConfig, note: dict[str, Any], token: str, exc: Exception
) -> tuple[bool, str]:
    """Record a failed run on its note and release the lease: retry after a back-off, or
    `failed` once out of attempts or when the error says retrying cannot help. The
    database itself may be what failed: then keep trying while the lease lasts, or the note
    would sit unclaimable for the whole lease after the database is back. Returns (gave
    up, error)."""
    attempts = int(note.get("index_attempts") or 1)
    give_up = attempts >= config.max_attempts or not getattr(exc, "retryable", True)
    delay = backoff_seconds(attempts, config.backoff_base_s, config.backoff_max_s)
    error = f"{type(exc).__name__}: {exc}"
    retry_at = datetime.now(UTC) + timedelta(seconds=delay)
    await while_unavailable(
        "note.release_retry",
        lambda: queue.fail(note["_id"], token, error=error, retry_at=retry_at, give_up=give_up),
        config.lease_s,
    )
    obs.index_failures.add(1, {"final": give_up})
    log.warning(
        "note.index_failed" if give_up else "note.index_retry_scheduled",
        attempt=attempts,
        retry_in_s=None if give_up else round(delay, 2),
        error=error,
        exc_info=not isinstance(exc, EmbeddingError),
    )
    return give_up, error
