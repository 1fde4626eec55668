"""The checker against a live database, with the races placed deterministically: an edit is
committed (and indexed by the app's real worker) exactly between two of the checker's reads.

The first two produced false `orphan_chunks` findings before the confirmation re-read the
note after its chunks and kept only findings seen twice; with the first, `--repair` deleted
the chunks of the version being served. The last two pin what the filtering must not hide
and what it reports instead of judging.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from bson import ObjectId

from api.chunk_store.repository import ChunksRepository
from api.integrity import IntegrityChecker
from tests.helpers import sectioned_note, wait_evicted, wait_indexed
from tests.integrity.conftest import World


async def edit(world: World, note_id: ObjectId, seed: int) -> None:
    r = await world.api.client.patch(
        f"/v1/notes/{note_id}",
        json={"content_md": sectioned_note(3, seed=seed, words=25)},
        headers=world.headers,
    )
    assert r.status_code == 200, r.text


async def edit_and_index(world: World, note_id: ObjectId, seed: int) -> None:
    """An edit, indexed by the worker, its old version evicted."""
    await edit(world, note_id, seed)
    await wait_indexed(world.api, world.headers, str(note_id))
    await wait_evicted(world.db, note_id)


def before_call(obj: Any, name: str, hooks: dict[int, Callable[[], Awaitable[None]]]) -> None:
    """Run `hooks[n]` just before the n-th call (1-based) of the bound method `obj.name`."""
    original = getattr(obj, name)
    calls = 0

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls in hooks:
            await hooks[calls]()
        return await original(*args, **kwargs)

    setattr(obj, name, wrapped)


def suspect_after_the_scan(checker: IntegrityChecker, world: World, note_id: ObjectId) -> None:
    """The scan reads the chunks before the notes: an edit indexed in between leaves the old
    version's chunks in its view, so the note becomes a suspect for the confirmation."""
    scan_notes = checker.queries.iter_notes

    async def notes_after_an_edit() -> Any:
        await edit_and_index(world, note_id, 99)
        async for doc in scan_notes():
            yield doc

    checker.queries.iter_notes = notes_after_an_edit  # type: ignore[method-assign]


async def versions(world: World, note_id: ObjectId) -> set[int]:
    return {c["note_version"] for c in await world.chunks(note_id)}


async def test_an_edit_between_the_note_and_its_chunks_is_not_an_orphan(world: World) -> None:
    """The note is read at version v, its chunks after v+1 was indexed and v evicted: those
    chunks are the live ones, not a dead version's, and the repair must not delete them."""
    note_id = world.note_ids[0]
    checker = IntegrityChecker(world.db, world.expect, settle_s=0)
    # The confirmation reads the note, then its chunks: the edit lands in between.
    before_call(checker.queries, "chunks_of", {1: lambda: edit_and_index(world, note_id, 101)})
    suspect_after_the_scan(checker, world, note_id)
    report = await checker.run()

    assert report.suspects == 1, "the scan's own race must make the note a suspect"
    assert report.ok and report.findings == [], report.findings
    note = await world.db.notes.find_one({"_id": note_id})
    live = await versions(world, note_id)
    assert live == {note["indexed_version"]}
    assert (await checker.repair(report)).chunks_deleted == 0
    assert len(await world.chunks(note_id)) == note["chunk_count"] > 0


@pytest.fixture
def evictions(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Holds the evictions of old chunk versions of `gate.note_id` until released (the worker
    commits a new version, then waits here with the old chunks still stored)."""

    class Gate:
        def __init__(self) -> None:
            self.note_id: ObjectId | None = None
            self.open = asyncio.Event()
            self.waiting = asyncio.Event()

        async def release(self, world: World, note_id: ObjectId) -> None:
            """Let the held eviction run and wait until the note says it is done."""
            self.open.set()
            await wait_evicted(world.db, note_id)

        def hold_again(self) -> None:
            self.open, self.waiting = asyncio.Event(), asyncio.Event()

    gate = Gate()
    original = ChunksRepository.delete_older_versions

    async def held(self: ChunksRepository, note_id: ObjectId, keep_version: int) -> int:
        if note_id == gate.note_id:
            gate.waiting.set()
            await gate.open.wait()  # the Event of this eviction, even after `hold_again`
        return await original(self, note_id, keep_version)

    monkeypatch.setattr(ChunksRepository, "delete_older_versions", held)
    yield gate
    gate.open.set()


async def test_two_passing_evictions_are_not_one_orphan(world: World, evictions: Any) -> None:
    """Each confirmation catches a note between a commit and its eviction, of a different
    version each time: no chunk is stale in both, so nothing is reported."""
    note_id = evictions.note_id = world.note_ids[2]
    before = await versions(world, note_id)
    await edit(world, note_id, 200)
    await asyncio.wait_for(evictions.waiting.wait(), 30)
    first_stale = await versions(world, note_id)
    assert len(first_stale) == 2 and before < first_stale

    async def next_edit_held_at_its_eviction() -> None:
        await evictions.release(world, note_id)
        evictions.hold_again()
        await edit(world, note_id, 201)
        await asyncio.wait_for(evictions.waiting.wait(), 30)

    checker = IntegrityChecker(world.db, world.expect, settle_s=0.1)
    before_call(checker.queries, "chunks_of", {2: next_edit_held_at_its_eviction})
    report = await checker.run()

    second_stale = await versions(world, note_id)
    assert len(second_stale) == 2 and second_stale != first_stale, "both races happened"
    assert report.suspects == 1
    assert report.ok and report.findings == [], report.findings
    await evictions.release(world, note_id)
    await world.converge()
    assert (await world.check()).ok


async def test_a_dead_version_that_stays_is_still_reported(world: World) -> None:
    """The two confirmations only filter what moves: a stale version left behind (a worker
    killed between commit and eviction, no sweep yet) is found and repaired."""
    note_id = world.note_ids[3]
    note = await world.db.notes.find_one({"_id": note_id})
    stale = [
        {**c, "_id": ObjectId(), "note_version": note["indexed_version"] - 1}
        for c in await world.chunks(note_id)
    ]
    await world.db.note_chunks.insert_many(stale)
    report = await IntegrityChecker(world.db, world.expect, settle_s=0.1).run()
    [finding] = report.violations
    assert finding.kind == "orphan_chunks" and finding.note_id == note_id
    assert set(finding.delete_ids) == {c["_id"] for c in stale}
    assert (await IntegrityChecker(world.db, world.expect).repair(report)).chunks_deleted == len(
        stale
    )
    assert (await world.check()).ok


async def test_a_note_that_changes_on_every_read_is_unsettled_not_judged(world: World) -> None:
    """Edited between the reads of every confirmation attempt: the checker cannot see the
    note and its chunks in one state, so it says so instead of reporting a finding."""
    note_id = world.note_ids[1]
    checker = IntegrityChecker(world.db, world.expect, settle_s=0)
    seeds = iter(range(300, 400))
    before_call(
        checker.queries,
        "chunks_of",
        {n: lambda: edit(world, note_id, next(seeds)) for n in range(1, 20)},
    )
    suspect_after_the_scan(checker, world, note_id)
    report = await checker.run()
    assert report.suspects == 1 and report.unsettled == 1
    assert report.findings == [] and report.to_dict()["unsettled"] == 1
    await world.converge()
    assert (await world.check()).ok
