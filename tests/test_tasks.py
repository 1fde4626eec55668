"""cancel_and_wait stops a loop that lost its cancellation (the Python 3.11 wait_for race
that left an interrupted migration, and app shutdowns, waiting forever)."""

from __future__ import annotations

import asyncio

import pytest

from api.tasks import cancel_and_wait


async def _loop_that_swallows_one_cancel(queue: asyncio.Queue[int], swallowed: list[int]) -> None:
    # What a lost cancellation looks like from the outside: the CancelledError never
    # reaches the loop, which goes back to waiting for work that will never come.
    while True:
        try:
            await queue.get()
        except asyncio.CancelledError:
            if not swallowed:
                swallowed.append(1)
                continue
            raise


async def test_a_single_cancel_leaves_the_loop_running() -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    swallowed: list[int] = []
    task = asyncio.create_task(_loop_that_swallows_one_cancel(queue, swallowed))
    await asyncio.sleep(0)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=0.3)
    assert not done and swallowed == [1]  # the failure mode the helper exists for
    await cancel_and_wait([task])
    assert task.cancelled()


async def test_cancel_and_wait_stops_every_task_and_consumes_errors() -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    swallowed: list[int] = []

    async def fails() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("boom")

    stubborn = asyncio.create_task(_loop_that_swallows_one_cancel(queue, swallowed))
    failing = asyncio.create_task(fails())
    plain = asyncio.create_task(asyncio.sleep(3600))
    await asyncio.sleep(0.01)
    # The loop swallows the first cancel: returning at all takes a later one. The bound
    # (1 200 rounds of `every_s`) only makes a hang fail here, not at the suite's timeout.
    async with asyncio.timeout(60):
        await cancel_and_wait([stubborn, failing, plain], every_s=0.05)
    assert stubborn.cancelled() and plain.cancelled() and swallowed == [1]
    assert isinstance(failing.exception(), RuntimeError)


async def test_nothing_to_do_returns_at_once() -> None:
    await cancel_and_wait([])
    done = asyncio.create_task(asyncio.sleep(0))
    await done
    await cancel_and_wait([done])
    with pytest.raises(asyncio.CancelledError):
        task = asyncio.create_task(asyncio.sleep(3600))
        await asyncio.sleep(0)
        await cancel_and_wait([task])
        await task
