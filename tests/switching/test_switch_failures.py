"""A re-embed into a new model that fails (the embedder errors) or is interrupted (the app
stops mid-way, then starts again) leaves the previous index serving, drops nothing of it,
and resumes to completion."""

from __future__ import annotations

import asyncio
from typing import Any

from pymongo import AsyncMongoClient

from tests.conftest import running_app
from tests.helpers import openai_indexing_settings
from tests.switching.support import (
    Answers,
    during_switch,
    populate,
    search_all,
    status,
    wait_old_generation_gone,
)

NOTES = 30


async def _populated(make_settings: Any) -> tuple[dict[str, str], Answers, int]:
    async with running_app(make_settings()) as api:
        h = await api.new_user()
        await populate(api, h, NOTES)
        baseline, _ = await search_all(api, h)
        chunks = await api.container.db.note_chunks.count_documents({})
    return h, baseline, chunks


async def _until(what: str, predicate: Any, timeout_s: float = 120.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        value = await predicate()
        if value:
            return value
        assert loop.time() < deadline, f"not {what} within {timeout_s}s"
        await asyncio.sleep(0.1)


async def test_errors_leave_the_old_index_serving_and_a_restart_resumes(
    make_settings: Any, openai_stub: Any
) -> None:
    h, baseline, old_chunks = await _populated(make_settings)
    remote = openai_indexing_settings(make_settings, openai_stub.base_url)(
        autonote_index_workers=2, autonote_index_max_attempts=2
    )
    openai_stub.fail_next(500, count=100_000, path="/v1/embeddings")
    async with running_app(remote) as api:
        db = api.container.db

        async def all_failed() -> bool:
            return (await status(api, h))["notes"]["failed"] == NOTES

        checks = 0
        while not await all_failed():  # every note fails, attempt after attempt
            answers, bodies = await search_all(api, h)
            assert answers == baseline, "search changed while the new model failed"
            assert all(b["warning"] is None for b in bodies)
            checks += 1
        await _until("all failed", all_failed)
        assert checks >= 2
        now = await status(api, h)
        assert now["switching"] is True and now["notes"]["done"] == 0
        # Nothing of the old index went: not by the runs, not by the maintenance sweeps.
        await api.container.indexing.workers.maintenance_once(orphans=True)
        assert await db.note_chunks.count_documents({}) == old_chunks
        answers, _ = await search_all(api, h)
        assert answers == baseline
        assert (await status(api, h))["switching"] is True, "failed notes hold the switch"

    openai_stub.reset()  # the provider is back; a restart gives the failed notes new attempts
    async with running_app(remote) as api:
        answers, _ = await search_all(api, h)
        assert answers == baseline, "after the restart, still the old index until complete"

        async def switched() -> bool:
            return not (await status(api, h))["switching"]

        await _until("switched", switched)
        final = await status(api, h)
        assert final["notes"]["done"] == NOTES and final["notes"]["failed"] == 0
        await wait_old_generation_gone(api.container.db, final["configured"]["generation"])
        answers, _ = await search_all(api, h)
        assert all(answers.values())


async def test_passing_errors_are_retried_without_a_restart(
    make_settings: Any, openai_stub: Any
) -> None:
    h, baseline, _ = await _populated(make_settings)
    remote = openai_indexing_settings(make_settings, openai_stub.base_url)(autonote_index_workers=1)
    openai_stub.set_delay(0.2)
    openai_stub.fail_next(500, count=24, path="/v1/embeddings")  # 8 runs' worth of retries
    async with running_app(remote) as api:

        def same_as_before(answers: Answers, bodies: list[Any], now: dict[str, Any]) -> None:
            assert answers == baseline

        await during_switch(api, h, same_as_before)
        failures = [r for r in openai_stub.requests_to("/v1/embeddings") if r.status == 500]
        assert len(failures) == 24
        final = await status(api, h)
        assert final["switching"] is False and final["notes"]["done"] == NOTES


async def test_an_interrupted_re_embed_resumes_where_it_stopped(
    make_settings: Any, openai_stub: Any, mongo_url: str, db_name: str
) -> None:
    h, baseline, old_chunks = await _populated(make_settings)
    remote = openai_indexing_settings(make_settings, openai_stub.base_url)(autonote_index_workers=1)
    openai_stub.set_delay(0.3)
    async with running_app(remote) as api:

        async def some_done() -> int:
            done = (await status(api, h))["notes"]["done"]
            return done if done >= 8 else 0

        done_before = await _until("some notes re-embedded", some_done)
        answers, _ = await search_all(api, h)
        assert answers == baseline
    # Stopped mid-way: the old generation is whole, the done notes keep it as `served`.
    assert done_before < NOTES
    client: AsyncMongoClient = AsyncMongoClient(mongo_url)
    db = client[db_name]
    kept = await db.notes.find_one({"served": {"$type": "object"}})
    assert kept is not None
    old = kept["served"]["generation"]
    assert len(await db.note_chunks.distinct("generation")) == 2
    assert await db.note_chunks.count_documents({"generation": old}) == old_chunks
    served = await db.notes.count_documents({"served.generation": old})
    assert served >= done_before
    # The notes re-embedded before the stop, and when their commit landed.
    done = {
        n["_id"]: n["indexed_at"]
        async for n in db.notes.find({"served.generation": old}, {"indexed_at": 1})
    }

    async with running_app(remote) as api:
        answers, _ = await search_all(api, h)
        assert answers == baseline, "the restart serves the old index at once"
        seen = await status(api, h)
        assert seen["switching"] is True and seen["notes"]["done"] >= done_before

        def same_as_before(answers: Answers, bodies: list[Any], now: dict[str, Any]) -> None:
            assert answers == baseline

        await during_switch(api, h, same_as_before)
        final = await status(api, h)
        target = final["configured"]["generation"]
        await wait_old_generation_gone(api.container.db, target)
        assert final["notes"]["done"] == NOTES
    # Resumed: the notes done before the stop were not indexed again (the switch's clean-up
    # only clears their `served`).
    again = {
        n["_id"]: n["indexed_at"]
        async for n in db.notes.find({"_id": {"$in": list(done)}}, {"indexed_at": 1})
    }
    assert again == done
    await client.close()
