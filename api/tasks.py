"""Stopping background tasks for sure."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]], *, every_s: float = 0.5) -> None:
    """Cancel `tasks` and wait until every one is done, cancelling again every `every_s`.

    Python 3.11's `asyncio.wait_for`, which PyMongo's async socket I/O uses, can swallow a
    cancellation that races with its result (CPython gh-86296, fixed in 3.12). A loop that
    lost its cancellation kept running, and a shutdown or an interrupted migration waited
    for it forever. Exceptions of the stopped tasks are consumed: they are being stopped.
    """
    everything = [t for t in tasks if t is not asyncio.current_task()]
    pending = {t for t in everything if not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=every_s)
    for task in everything:
        if not task.cancelled():
            task.exception()  # mark retrieved; a failure while stopping is not news
