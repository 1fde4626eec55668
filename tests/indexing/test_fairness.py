"""Users take turns on the indexing queue (`api.indexing.fairness`)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from bson import ObjectId

from api.indexing import fairness
from api.indexing.fairness import AuthorRotation
from tests.conftest import Api, running_app
from tests.helpers import sectioned_note


class FakeQueue:
    """`Claims` over notes per author, each author's oldest first (the real queue: the
    tests below the pure ones)."""

    def __init__(self, queued: dict[ObjectId, int]) -> None:
        self.queued = dict(queued)
        self.calls: list[str] = []
        self.dead = 0  # notes of a dead worker

    async def authors(self) -> list[ObjectId | None]:
        self.calls.append("authors")
        return [a for a, n in self.queued.items() if n]

    async def for_author(self, author: ObjectId | None) -> dict[str, Any] | None:
        self.calls.append("author")
        if author is None or not self.queued.get(author):
            return None
        self.queued[author] -= 1
        return {"author_id": author}

    async def stale(self) -> dict[str, Any] | None:
        self.calls.append("stale")
        if not self.dead:
            return None
        self.dead -= 1
        return {"author_id": "dead worker's"}

    async def any(self) -> dict[str, Any] | None:  # the most overdue: the first author's
        self.calls.append("any")
        author = next((a for a, n in self.queued.items() if n), None)
        return None if author is None else await self.for_author(author)


async def test_authors_take_turns_and_a_lone_author_gets_every_claim() -> None:
    alice, bob, carol = ObjectId(), ObjectId(), ObjectId()
    queue = FakeQueue({alice: 1000, bob: 2, carol: 1})
    rotation = AuthorRotation(refresh_s=3600)

    async def claim() -> ObjectId:
        note = await rotation.claim(queue)
        assert note is not None
        return note["author_id"]

    order = [await claim() for _ in range(8)]
    assert set(order[:3]) == {alice, bob, carol}
    assert order.count(bob) == 2 and order.count(carol) == 1 and order[5:] == [alice] * 3
    assert queue.calls.count("authors") == 1 and queue.calls.count("stale") == 1


async def test_every_dead_workers_note_comes_first_after_a_refresh() -> None:
    """Every dead worker's note is claimed before any user's turn, one per claim, not one
    per refresh (a dead 16-loop process leaves 16)."""
    queue = FakeQueue({ObjectId(): 100, ObjectId(): 100})
    queue.dead = 5
    rotation = AuthorRotation(refresh_s=3600)
    got = [await rotation.claim(queue) for _ in range(7)]
    assert [n["author_id"] for n in got[:5] if n] == ["dead worker's"] * 5
    assert all(n and n["author_id"] != "dead worker's" for n in got[5:])
    assert queue.calls.count("stale") == 6  # the sixth finds none; then no more until a refresh


async def test_a_newcomer_gets_the_first_turn_after_the_next_refresh() -> None:
    alice, bob = ObjectId(), ObjectId()
    queue = FakeQueue({alice: 1000})
    rotation = AuthorRotation(refresh_s=0.05)
    for _ in range(3):
        await rotation.claim(queue)
    queue.queued[bob] = 1
    await asyncio.sleep(0.06)
    note = await rotation.claim(queue)
    assert note is not None and note["author_id"] == bob


async def test_an_idle_poll_costs_one_claim_when_every_author_waits_out_a_back_off() -> None:
    """With every note in back-off an idle poll costs one claim, not an author claim per
    probe and a fallback: the author list holds only authors with due notes."""
    queue = FakeQueue({})
    rotation = AuthorRotation(refresh_s=3600)
    assert await rotation.claim(queue) is None
    assert queue.calls == ["authors", "stale", "any"]
    queue.calls.clear()
    assert await rotation.claim(queue) is None
    assert queue.calls == ["any"]


async def test_workers_sharing_the_rotation_survive_a_refresh_that_empties_it() -> None:
    """Worker A probed while worker B's refresh emptied the shared list: IndexError."""
    alice = ObjectId()
    gate = asyncio.Event()

    class Stalled(FakeQueue):
        async def for_author(self, author: ObjectId | None) -> dict[str, Any] | None:
            await gate.wait()  # A waits here while B refreshes
            return None

    queue = Stalled({alice: 1})
    rotation = AuthorRotation(refresh_s=0.01)
    a = asyncio.create_task(rotation.claim(queue))
    await asyncio.sleep(0.02)
    queue.queued.clear()
    assert await rotation.claim(queue) is None  # B: the refresh lists nobody
    gate.set()
    assert await a is None


async def alice_backlog_then_bob(api: Api, backlog: int) -> str:
    """Alice queues `backlog` notes, then Bob one; Bob's note id."""
    alice, bob = await api.new_user("alice"), await api.new_user("bob")
    for i in range(backlog):
        body = {"title": f"A{i}", "content_md": f"alice note {i}"}
        assert (await api.client.post("/v1/notes", json=body, headers=alice)).status_code == 201
    body = {"title": "B", "content_md": "bob's note"}
    return (await api.client.post("/v1/notes", json=body, headers=bob)).json()["id"]


async def test_one_users_backlog_does_not_hold_up_anothers_note(make_settings: Any) -> None:
    """Alice queues 40 notes, then Bob one: Bob's is among the first two indexed, not
    behind Alice's whole backlog."""
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        bob_note = await alice_backlog_then_bob(api, 40)
        reconciler = api.container.indexing.reconciler
        first = [str((await reconciler.run_once()).note_id) for _ in range(2)]
        assert bob_note in first
        done = 2
        while await reconciler.run_once() is not None:
            done += 1
        assert done == 41  # and Alice's backlog still drains completely


async def test_a_dead_workers_note_and_an_authorless_note_do_not_wait_for_a_backlog(
    make_settings: Any,
) -> None:
    """A note whose worker died (`indexing`, lease expired) belongs to no user's turn: it
    is not claimed behind Alice's whole backlog; a legacy note with no author likewise."""
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        crashed = ObjectId(await alice_backlog_then_bob(api, 30))
        past = datetime.now(UTC) - timedelta(seconds=5)
        await api.container.db.notes.update_one(
            {"_id": crashed},
            {
                "$set": {
                    "index_status": "indexing",
                    "lease_token": "dead:1",
                    "lease_expires_at": past,
                    "index_attempts": 1,
                }
            },
        )
        orphan = (
            await api.container.db.notes.insert_one(
                {
                    "title": "x",
                    "content_md": "y",
                    "status": "active",
                    "version": 1,
                    "index_status": "pending",
                    "next_attempt_at": datetime.now(UTC),
                    "index_attempts": 0,
                    "created_at": datetime.now(UTC),
                }
            )
        ).inserted_id
        reconciler = api.container.indexing.reconciler
        first = [(await reconciler.run_once()).note_id for _ in range(4)]
        assert crashed in first and orphan in first, first
        orphan_doc = await api.container.db.notes.find_one({"_id": orphan})
        assert (
            orphan_doc["index_status"] == "failed" and "no author_id" in orphan_doc["index_error"]
        )


async def test_an_author_whose_only_due_note_is_leased_gets_no_turn(make_settings: Any) -> None:
    """A note edited while a worker indexes it is `pending` under that worker's live lease:
    no claim can take it until the lease ends, so its author must not be offered a turn
    (the turn would cost a claim that cannot succeed)."""
    from api.indexing.queue import IndexQueue

    async with running_app(make_settings(autonote_index_workers=0)) as api:
        bob_note = ObjectId(await alice_backlog_then_bob(api, 1))
        notes = api.container.db.notes
        alice_note = await notes.find_one({"_id": {"$ne": bob_note}})
        now = datetime.now(UTC)
        await notes.update_one(
            {"_id": alice_note["_id"]},
            {"$set": {"lease_token": "w:1", "lease_expires_at": now + timedelta(seconds=30)}},
        )
        bob = (await notes.find_one({"_id": bob_note}))["author_id"]
        assert await IndexQueue(api.container.db).due_authors(now) == [bob]
        later = now + timedelta(seconds=31)  # the lease has run out: Alice's turn is back
        assert sorted(map(str, await IndexQueue(api.container.db).due_authors(later))) == sorted(
            [str(bob), str(alice_note["author_id"])]
        )


async def test_a_long_note_hands_its_worker_to_another_users_note(
    make_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Turns are also taken within a long note, so one user's big notes do not hold every
    worker while another user's one-line note waits: a run that has embedded for `turn_s`
    hands over when another user has a note due, and the next run of its note resumes from
    the embedding cache."""
    settings = make_settings(autonote_index_workers=0, autonote_index_turn_s=0.001)
    monkeypatch.setattr(fairness, "WAITING_S", 0.0)  # Alice's note counts as waiting at once
    async with running_app(settings) as api:
        alice, bob = await api.new_user("alice"), await api.new_user("bob")
        api.container.embedder.slice_texts = 4
        body = {"title": "Long", "content_md": sectioned_note(40, seed=3)}
        long_id = (await api.client.post("/v1/notes", json=body, headers=bob)).json()["id"]
        reconciler = api.container.indexing.reconciler
        embed = api.container.embedder.embed
        slices: list[int] = []
        alice_note: list[str] = []

        async def embed_and_meanwhile_alice_writes(texts: list[str]) -> Any:
            slices.append(len(texts))
            if len(slices) <= 2:
                # A run hands over only once it has embedded for as long as it took to get
                # there (chunking, reading). With the model already loaded by an earlier
                # test, two slices could embed faster than a loaded machine chunked the
                # note, and the run rightly kept its turn: a fresh-clone run failed so.
                await asyncio.sleep(0.25)
            if len(slices) == 2:  # Bob's run is well under way
                note = {"title": "Short", "content_md": "one line"}
                r = await api.client.post("/v1/notes", json=note, headers=alice)
                alice_note.append(r.json()["id"])
            return await embed(texts)

        api.container.embedder.embed = embed_and_meanwhile_alice_writes
        first = await reconciler.run_once()
        assert first is not None and first.status == "handed_over", first
        assert str(first.note_id) == long_id and len(slices) == 2
        second = await reconciler.run_once()
        assert second is not None and str(second.note_id) == alice_note[0]
        assert second.status == "indexed"
        third = await reconciler.run_once()
        assert third is not None and str(third.note_id) == long_id and third.status == "indexed"
        note = (await api.client.get(f"/v1/notes/{long_id}", headers=bob)).json()
        stats = note["last_index_stats"]
        # The slices embedded before the hand-over come back from the cache, and count as
        # embedded, not reused.
        assert stats["embedded"] == stats["chunks"] == sum(slices) - 1  # 1: Alice's note
        assert stats["reused"] == 0
        assert note["index_attempts"] == 0 and note["index_status"] == "indexed"
        stored = await api.container.db.notes.find_one({"_id": ObjectId(long_id)})
        assert stored["index_progress"] is None


async def test_a_note_slow_to_chunk_is_not_handed_over_after_every_slice(
    make_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn is not counted from the claim (a note whose chunking takes about `turn_s`
    would be handed over after every slice and chunked again each time): a run embeds at
    least as long as it took to get there; and a hand-over whose release meets a database
    blip still hands the note back, not as an attempt."""
    from pymongo.errors import AutoReconnect

    settings = make_settings(autonote_index_workers=0, autonote_index_turn_s=0.001)
    monkeypatch.setattr(fairness, "WAITING_S", 0.0)
    async with running_app(settings) as api:
        alice, bob = await api.new_user("alice"), await api.new_user("bob")
        api.container.embedder.slice_texts = 4
        reconciler = api.container.indexing.reconciler
        chunk, embed = reconciler.chunker.chunk_note, api.container.embedder.embed
        chunked: list[str] = []

        def slow_chunk(content: str, title: str) -> Any:
            chunked.append(title)
            time.sleep(0.3)  # a big note's chunking
            return chunk(content, title)

        async def slow_embed(texts: list[str]) -> Any:
            await asyncio.sleep(0.05)
            return await embed(texts)

        reconciler.chunker.chunk_note = slow_chunk
        api.container.embedder.embed = slow_embed
        body = {"title": "Long", "content_md": sectioned_note(40, seed=3)}
        long_id = (await api.client.post("/v1/notes", json=body, headers=bob)).json()["id"]
        short = {"title": "Short", "content_md": "one line"}
        assert (await api.client.post("/v1/notes", json=short, headers=alice)).status_code == 201
        release, blips = reconciler.queue.release, [1]

        async def flaky_release(*args: Any) -> Any:
            if blips:
                blips.pop()
                raise AutoReconnect("connection reset")
            return await release(*args)

        reconciler.queue.release = flaky_release
        outcomes = []
        while (outcome := await reconciler.run_once()) is not None:
            outcomes.append(outcome)
        long_runs = [o.status for o in outcomes if str(o.note_id) == long_id]
        assert long_runs[-1] == "indexed" and chunked.count("Long") == len(long_runs) <= 3
        assert "handed_over" in long_runs and not blips  # the blip was met and retried
        note = await api.container.db.notes.find_one({"_id": ObjectId(long_id)})
        assert note["index_status"] == "indexed" and note["last_index_stats"]["reused"] == 0
