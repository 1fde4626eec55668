"""Running one note until it settles: the loop the synchronous write path
(`IndexWorkers.index_now`) and the migration (`api.migration.drive`) share.

Each turn claims the note by id and indexes it (`Reconciler.run_once(note_id)`), unless the
last step said to look again only. When the run did not end the note (another worker holds
it, it waits out a back-off, an edit re-queued it), the caller's `Settling` looks at the
note and decides whether to stop, or how long to wait before the next turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from bson import ObjectId

from api.indexing.types import IndexOutcome

R = TypeVar("R")

RunOnce = Callable[[ObjectId], Awaitable[IndexOutcome | None]]


@dataclass(frozen=True, slots=True)
class Step(Generic[R]):
    """The loop's next move: stop with `result`, or wait `wait_s` and take another turn,
    claiming the note (`claim`) or only looking at it."""

    stop: bool = False
    result: R | None = None
    wait_s: float = 0.0
    claim: bool = True


class Settling(Protocol[R]):
    """A caller's rules for one note."""

    async def look(self, outcome: IndexOutcome | None) -> Step[R] | None:
        """After a turn's run (`outcome`; None when nothing was claimed or the turn only
        looks): the step when that settles it, else None once the note's state is read."""
        ...

    async def decide(self) -> Step[R]:
        """The next step, from the state `look` read."""
        ...

    async def recover(self, error: Exception) -> bool:
        """A turn's run or look raised `error`: True (after any pause) to take another
        turn, claiming the note; False to raise it."""
        ...


async def run_until_settled(
    run_once: RunOnce, note_id: ObjectId, settling: Settling[R]
) -> R | None:
    """Take turns on `note_id` until `settling` stops; its result."""
    claim = True
    while True:
        try:
            outcome = await run_once(note_id) if claim else None
            step = await settling.look(outcome)
        except Exception as exc:
            if not await settling.recover(exc):
                raise
            claim = True
            continue
        if step is None:
            step = await settling.decide()
        if step.stop:
            return step.result
        if step.wait_s > 0:
            await asyncio.sleep(step.wait_s)
        claim = step.claim
