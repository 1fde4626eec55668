"""Keeping a run's lease alive, and retrying database writes a run must not lose.

Both are about a run outliving a database blip: the heartbeat must survive one, or the lease
runs out mid-run and another worker redoes the note; a failure record or an eviction must be
retried, or the note sits unclaimable (or keeps stale chunks) until a sweep.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from bson import ObjectId
from pymongo.errors import PyMongoError

from api.db.client import is_unavailable
from api.notes.queue import IndexQueue

log = structlog.get_logger(__name__)


async def keep_lease(queue: IndexQueue, note_id: ObjectId, token: str, lease_s: float) -> None:
    """Extend the lease every third of it until the run ends (cancel) or the lease is lost.
    A failed extension is retried soon (the lease still runs): one database blip used to
    end the heartbeat, the lease ran out mid-run and another worker embedded the whole note
    again (found by review)."""
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


async def claim_or_hand_back(
    queue: IndexQueue,
    claim: Awaitable[dict[str, Any] | None],
    token: str,
    lease_expires_at: datetime,
    budget_s: float,
) -> dict[str, Any] | None:
    """Await `claim`. If the database becomes unavailable mid-claim, the claim may have been
    applied with its reply lost: the note then said `indexing` under a lease nobody held,
    and no worker could take it for a whole lease (120 s; seen as a CI failure of the
    SIGKILL restart test). Hand such a note back, retrying while the database is down,
    then raise the claim's error."""
    try:
        return await claim
    except PyMongoError as exc:
        if is_unavailable(exc):
            await while_unavailable(
                "note.claim_hand_back_retry",
                lambda: queue.release_unconfirmed_claim(token, lease_expires_at),
                budget_s,
            )
        raise
