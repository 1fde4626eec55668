"""Which note a worker claims next: users take turns.

The queue used to hand out the most overdue note of anyone: one user's import of 200 files
(or a script of many writes) made every other user's new notes wait behind all of it — a
one-line note took 116 s instead of 0.3 s to become searchable (found by review). Workers
now go round the users with queued notes, taking each one's most overdue note in turn; a
user alone on the queue gets every worker. The list of users is read again every
`refresh_s` (one DISTINCT scan of the `index_queue_author` index), so a user who just wrote
waits at most that long plus the note in hand, whatever the backlog.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from bson import ObjectId

MAX_PROBES = 16  # users tried per claim before taking the most overdue note of anyone


class AuthorRotation:
    """Round-robin over the authors with queued notes, shared by one process's workers."""

    def __init__(self, refresh_s: float = 1.0) -> None:
        self.refresh_s = refresh_s
        self._order: deque[ObjectId] = deque()
        self._read_at = float("-inf")

    async def claim(
        self,
        authors: Callable[[], Awaitable[list[ObjectId]]],
        claim: Callable[[ObjectId | None], Awaitable[dict[str, Any] | None]],
    ) -> dict[str, Any] | None:
        """Claim for the next author in turn (`claim(author)`); after MAX_PROBES authors
        with nothing due (back-off), or none at all, the most overdue note (`claim(None)`,
        which also takes notes whose worker died)."""
        if time.monotonic() - self._read_at >= self.refresh_s:
            self._read_at = time.monotonic()
            fresh = await authors()
            # Keep the turn order of authors still queued; newcomers go first.
            queued = set(fresh)
            known = [a for a in self._order if a in queued]
            seen = set(known)
            self._order = deque([a for a in fresh if a not in seen] + known)
        for _ in range(min(len(self._order), MAX_PROBES)):
            author = self._order[0]
            self._order.rotate(-1)
            note = await claim(author)
            if note is not None:
                return note
        return await claim(None)
