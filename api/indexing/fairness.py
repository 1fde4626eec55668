"""Which note a worker claims next: users take turns.

Workers go round the users with due notes, taking each one's most overdue note in turn; a
user alone on the queue gets every worker, and notes without an author (legacy documents)
take a turn as one more "user". The list of users is read again every `refresh_s` (one
DISTINCT scan of the `index_queue_author` index), so a user who just wrote waits at most that
long plus the notes in hand, whatever the backlog. Each refresh first takes the notes whose
worker died mid-run (in no user's turn). A run that has embedded for `turn_s` hands its
worker over when another user has a due note (`turn_over_check`); its vectors so far wait in
the embedding cache and its next run resumes from them. See docs/indexing.md.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from bson import ObjectId

from api.indexing.queue import IndexQueue

MAX_PROBES = 16  # users tried per claim before taking the most overdue note of anyone
# Another user's note counts as waiting (worth a hand-over) once it has been due this long:
# an idle worker, polling every AUTONOTE_INDEX_POLL_S (0.5 s), would have claimed it.
WAITING_S = 2.0

Author = ObjectId | None  # None: notes without an author
Note = dict[str, Any] | None


class Claims(Protocol):
    """The queue operations a claim is made of (`IndexQueue`, bound to one lease)."""

    async def authors(self) -> list[Author]:
        """Authors with notes due now."""
        ...

    async def for_author(self, author: Author) -> Note:
        """The author's most overdue due note."""
        ...

    async def stale(self) -> Note:
        """A note whose worker died (lease expired while `indexing`)."""
        ...

    async def any(self) -> Note:
        """The most overdue claimable note of anyone."""
        ...


class AuthorRotation:
    """Round-robin over the authors with due notes, shared by one process's workers."""

    def __init__(self, refresh_s: float = 1.0) -> None:
        self.refresh_s = refresh_s
        self._order: deque[Author] = deque()
        self._read_at = float("-inf")
        self._stale = False  # dead workers' notes may be waiting (checked since the refresh)

    def refresh_now(self) -> None:
        """Read the authors again at the next claim (a run just handed its worker over to
        another user's note, which a list up to `refresh_s` old may not hold)."""
        self._read_at = float("-inf")

    async def claim(self, claims: Claims) -> Note:
        """The next author's most overdue note; on a refresh, a dead worker's note first;
        after MAX_PROBES authors with nothing claimable, the most overdue of anyone."""
        if time.monotonic() - self._read_at >= self.refresh_s:
            self._read_at = time.monotonic()
            fresh = await claims.authors()
            # Keep the turn order of authors still queued; newcomers go first.
            queued = set(fresh)
            known = [a for a in self._order if a in queued]
            seen = set(known)
            self._order = deque([a for a in fresh if a not in seen] + known)
            self._stale = True
        if self._stale:
            # Every dead worker's note, one per claim, until none is left (a process whose
            # loops all died leaves one per loop).
            note = await claims.stale()
            if note is not None:
                return note
            self._stale = False
        if len(self._order) <= 1:  # one user or none: their turn is the whole queue
            return await claims.any()
        for _ in range(MAX_PROBES):
            if not self._order:  # another worker's refresh emptied it meanwhile
                break
            author = self._order[0]
            self._order.rotate(-1)
            note = await claims.for_author(author)
            if note is not None:
                return note
            # Nothing due: out of the turns until a refresh lists the author again (so no
            # claim probes a user whose notes are all done).
            with contextlib.suppress(ValueError):
                self._order.remove(author)
        return await claims.any()


class LeaseClaims:
    """`Claims` on the real queue, every claim taking the same lease (token and time)."""

    def __init__(
        self, queue: IndexQueue, token: str, now: datetime, lease_s: float, max_attempts: int
    ) -> None:
        self.queue, self.now = queue, now
        self.token, self.lease_s, self.max_attempts = token, lease_s, max_attempts

    async def authors(self) -> list[Author]:
        return await self.queue.due_authors(self.now)

    async def for_author(self, author: Author) -> Note:
        return await self.queue.claim_for_author(
            author,
            token=self.token,
            now=self.now,
            lease_s=self.lease_s,
            max_attempts=self.max_attempts,
        )

    async def stale(self) -> Note:
        return await self.queue.claim_stale(
            token=self.token, now=self.now, lease_s=self.lease_s, max_attempts=self.max_attempts
        )

    async def any(self, note_id: ObjectId | None = None) -> Note:
        """The most overdue claimable note (or `note_id`, if claimable)."""
        return await self.queue.claim(
            token=self.token,
            now=self.now,
            lease_s=self.lease_s,
            max_attempts=self.max_attempts,
            note_id=note_id,
        )


def turn_over_check(
    queue: IndexQueue, author: Author, turn_s: float
) -> Callable[[float], Awaitable[bool]]:
    """For a run of `author`'s note claimed now: whether, having embedded since
    `embedding_started` (a `time.monotonic()` reading), it should hand its worker over.

    Only once it has embedded for `turn_s` AND for as long as it took to get there (chunking
    and reading a big note), so a note whose chunking takes about `turn_s` is not handed
    over after every slice and chunked again each time. And only for another author's note
    due for WAITING_S already: a worker that is idle would have taken it by then."""
    claimed = time.monotonic()

    async def turn_over(embedding_started: float) -> bool:
        embedded_for = time.monotonic() - embedding_started
        if embedded_for < max(turn_s, embedding_started - claimed):
            return False
        return await queue.others_due(author, datetime.now(UTC) - timedelta(seconds=WAITING_S))

    return turn_over
