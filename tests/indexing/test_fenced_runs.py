"""A run that lost its lease (slow embedding: another worker took the note over) cannot
commit; the chunks it wrote anyway must not stay behind as orphans: on a trashed note
nothing would ever remove them, and beside a newer version they would wait for the next
edit. Each test parks run A in its embedding call, expires its lease, lets run B do the
note's current job, then lets A write and fail its commit. (A run checks its lease before
it writes, so A gets to write only when its lease runs out just after that check: these
tests let A pass the check.)"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from bson import ObjectId
from pymongo.errors import AutoReconnect

from api.indexing.reconciler import Reconciler
from tests.conftest import Api, running_app
from tests.helpers import (
    GatedEmbedder,
    RecordingEmbedder,
    lease_lost_after_its_check,
    sectioned_note,
    wait_indexed,
)


class RunA:
    """Run A, indexing version 2 of a fresh note, parked in its embedding call."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.reconciler = api.container.indexing.reconciler
        self.written = asyncio.Event()
        self.done = asyncio.Event()

    async def start(self) -> None:
        api, rec = self.api, self.reconciler
        self.h = await api.new_user()
        r = await api.client.post(
            "/v1/notes",
            json={"title": "N", "content_md": sectioned_note(3, seed=1)},
            headers=self.h,
        )
        self.id = r.json()["id"]
        self.oid = ObjectId(self.id)
        await wait_indexed(api, self.h, self.id)
        self.gate = GatedEmbedder(rec.embedder)
        rec.embedder = self.gate
        insert_version, drop_fenced = rec.chunks.insert_version, rec._drop_fenced

        async def insert_and_tell(*args: Any, **kwargs: Any) -> Any:
            result = await insert_version(*args, **kwargs)
            self.written.set()
            return result

        async def drop_and_tell(*args: Any) -> None:
            await drop_fenced(*args)
            self.done.set()

        rec.chunks.insert_version = insert_and_tell  # type: ignore[method-assign]
        rec._drop_fenced = drop_and_tell  # type: ignore[method-assign]
        lease_lost_after_its_check(rec)  # else A stops before it writes anything
        await api.client.patch(
            f"/v1/notes/{self.id}", json={"content_md": sectioned_note(3, seed=2)}, headers=self.h
        )
        await asyncio.wait_for(self.gate.entered.wait(), 30)
        past = datetime.now(UTC) - timedelta(seconds=1)  # A's lease ran out
        await api.container.db.notes.update_one(
            {"_id": self.oid}, {"$set": {"lease_expires_at": past}}
        )

    async def finish(self) -> None:
        """Let A write and fail its commit (and settle what it wrote)."""
        self.gate.release.set()
        await asyncio.wait_for(self.done.wait(), 30)

    async def chunks_once_settled(self) -> list[dict[str, Any]]:
        """The note's chunks once no run is due or running (a follow-up run may be)."""
        db = self.api.container.db
        for _ in range(200):
            note = await db.notes.find_one({"_id": self.oid})
            if note["index_status"] == "indexed" and note.get("lease_token") is None:
                break
            await asyncio.sleep(0.05)
        return await db.note_chunks.find({"note_id": self.oid}).to_list()


async def test_a_trashed_note_keeps_no_chunks_of_a_run_that_lost_its_lease(api: Api) -> None:
    a = RunA(api)
    await a.start()
    assert (await api.client.delete(f"/v1/notes/{a.id}", headers=a.h)).status_code == 200
    await a.reconciler.run_once(a.oid)  # B: the removal
    await a.finish()
    assert await a.chunks_once_settled() == []  # A's chunks were removed by one more run
    note = await api.container.db.notes.find_one({"_id": a.oid})
    assert note["status"] == "trashed" and note["indexed_version"] is None


async def test_no_older_version_stays_beside_the_indexed_one(api: Api) -> None:
    a = RunA(api)
    await a.start()
    await api.client.patch(
        f"/v1/notes/{a.id}", json={"content_md": sectioned_note(3, seed=3)}, headers=a.h
    )
    a.reconciler.embedder = a.gate.inner  # B embeds normally; A stays parked
    await a.reconciler.run_once(a.oid)  # B (or a background worker) indexes version 3
    after = await wait_indexed(api, a.h, a.id)
    assert after["indexed_version"] == 3
    await a.finish()  # A's version 2 is older than the indexed one: deleted at once
    left = await api.container.db.note_chunks.find({"note_id": a.oid}).to_list()
    assert {d["note_version"] for d in left} == {3} and len(left) == 3
    note = await api.container.db.notes.find_one({"_id": a.oid})
    assert note["indexed_version"] == 3 and note["chunk_count"] == 3


async def test_a_note_failed_while_a_run_wrote_keeps_no_chunks_of_that_run(api: Api) -> None:
    """A's lease runs out and, its attempts used up, maintenance marks the note failed
    (`fail_exhausted`) in the window between A's lease check and its write. A's chunks of
    version 2 must not stay beside the indexed version 1, invisible, until the next edit:
    the recheck A asks for does not touch a failed note."""
    a = RunA(api)
    await a.start()
    max_attempts = a.reconciler.config.max_attempts
    await api.container.db.notes.update_one(
        {"_id": a.oid}, {"$set": {"index_attempts": max_attempts}}
    )
    assert (await api.container.indexing.workers.maintenance_once(orphans=False)).exhausted
    await a.finish()
    note = await api.container.db.notes.find_one({"_id": a.oid})
    assert note["index_status"] == "failed" and note["indexed_version"] == 1
    left = await api.container.db.note_chunks.find({"note_id": a.oid}).to_list()
    assert {d["note_version"] for d in left} == {1} and len(left) == note["chunk_count"]


# Runs driven by hand (no background workers), so each interleaving is forced: A is the
# app's reconciler, B and R a second Reconciler (another worker process) on the database.


class Gate:
    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def wait(self) -> None:
        self.entered.set()
        await asyncio.wait_for(self.release.wait(), 30)


def gate_method(obj: Any, name: str, gate: Gate) -> None:
    """`obj.name` waits on `gate` before running."""
    real = getattr(obj, name)

    async def gated(*args: Any, **kwargs: Any) -> Any:
        await gate.wait()
        return await real(*args, **kwargs)

    setattr(obj, name, gated)


class HandDriven:
    """A note indexed at version 1, edited to version 2; run A parked in its embed call
    with its lease run out."""

    async def start(self, api: Api) -> None:
        self.api, self.db = api, api.container.db
        self.a = a = api.container.indexing.reconciler
        self.h = await api.new_user()
        r = await api.client.post(
            "/v1/notes",
            json={"title": "N", "content_md": sectioned_note(3, seed=1)},
            headers=self.h,
        )
        self.id, self.oid = r.json()["id"], ObjectId(r.json()["id"])
        assert (await a.run_once(self.oid)).status == "indexed"
        self.inner = a.embedder
        self.gate_a = a.embedder = GatedEmbedder(self.inner)
        await api.client.patch(
            f"/v1/notes/{self.id}", json={"content_md": sectioned_note(3, seed=2)}, headers=self.h
        )
        self.task_a = asyncio.create_task(a.run_once(self.oid))
        await asyncio.wait_for(self.gate_a.entered.wait(), 30)
        past = datetime.now(UTC) - timedelta(seconds=1)
        await self.db.notes.update_one({"_id": self.oid}, {"$set": {"lease_expires_at": past}})

    def other_worker(self) -> Reconciler:
        a = self.a
        return Reconciler(
            a.db, chunker=a.chunker, embedder=self.inner, model_key=a.model_key, config=a.config
        )

    async def settle(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Run the note until nothing is due (what the next worker would do)."""
        self.a.embedder = self.inner
        for _ in range(5):
            if await self.a.run_once(self.oid) is None:
                break
        note = await self.db.notes.find_one({"_id": self.oid})
        return note, await self.db.note_chunks.find({"note_id": self.oid}).to_list()


async def test_a_fenced_run_never_deletes_the_version_another_run_commits(
    make_settings: Any,
) -> None:
    """B (holding the lease) wrote version 2 and is about to commit; A (lease lost)
    deletes version 2 first, B's chunks with it, and writes its own: those are now the
    only copy of what B commits. A must not delete them (the note would end indexed at
    version 2 with no chunks)."""
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        run = HandDriven()
        await run.start(api)
        b = run.other_worker()
        gate_b = Gate()
        gate_method(b.queue, "complete", gate_b)
        task_b = asyncio.create_task(b.run_once(run.oid))
        await asyncio.wait_for(gate_b.entered.wait(), 30)  # B inserted, commit held
        run.gate_a.release.set()
        assert (await asyncio.wait_for(run.task_a, 30)).status == "lost_lease"
        gate_b.release.set()
        await asyncio.wait_for(task_b, 30)
        note, chunks = await run.settle()
        assert (note["index_status"], note["indexed_version"], note["chunk_count"]) == (
            "indexed",
            2,
            3,
        )
        assert sorted((c["note_version"], c["chunk_index"]) for c in chunks) == [
            (2, 0),
            (2, 1),
            (2, 2),
        ]


async def test_a_fenced_run_leaves_no_chunks_on_a_note_trashed_meanwhile(
    make_settings: Any,
) -> None:
    """B indexes version 2; the note is trashed and R removes it, reading B's chunks; A
    (lease lost) then replaces them with its own before R commits. R deletes only what it
    read: one more run must remove A's chunks."""
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        run = HandDriven()
        await run.start(api)
        assert (await run.other_worker().run_once(run.oid)).status == "indexed"  # B
        assert (await api.client.delete(f"/v1/notes/{run.id}", headers=run.h)).status_code == 200
        r = run.other_worker()
        gate_r = Gate()
        gate_method(r.queue, "complete", gate_r)
        task_r = asyncio.create_task(r.run_once(run.oid))
        await asyncio.wait_for(gate_r.entered.wait(), 30)  # R read the chunks
        run.gate_a.release.set()
        assert (await asyncio.wait_for(run.task_a, 30)).status == "lost_lease"
        gate_r.release.set()
        await asyncio.wait_for(task_r, 30)
        note, chunks = await run.settle()
        assert note["status"] == "trashed" and note["indexed_version"] is None
        assert chunks == []


async def indexed_then_trashed(api: Api) -> tuple[dict[str, str], ObjectId, list[ObjectId]]:
    """A note indexed by hand (3 chunks), then trashed: its removal is due."""
    h = await api.new_user()
    r = await api.client.post(
        "/v1/notes", json={"title": "N", "content_md": sectioned_note(3, seed=1)}, headers=h
    )
    oid = ObjectId(r.json()["id"])
    assert (await api.container.indexing.reconciler.run_once(oid)).status == "indexed"
    ids = [d["_id"] async for d in api.container.db.note_chunks.find({"note_id": oid})]
    assert len(ids) == 3
    assert (await api.client.delete(f"/v1/notes/{oid}", headers=h)).status_code == 200
    return h, oid, ids


async def test_a_removal_commits_only_once_the_chunks_are_gone(make_settings: Any) -> None:
    """Once a trashed note says `indexed`, nothing else deletes its chunks: a removal
    that committed first and deleted after would leave them for good when the process
    died in between (and a check run in that gap would flag them)."""
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        _, oid, _ = await indexed_then_trashed(api)
        rec = api.container.indexing.reconciler
        at_commit: list[int] = []
        complete = rec.queue.complete

        async def count_then_complete(*args: Any, **kwargs: Any) -> Any:
            at_commit.append(await api.container.db.note_chunks.count_documents({"note_id": oid}))
            return await complete(*args, **kwargs)

        rec.queue.complete = count_then_complete  # type: ignore[method-assign]
        assert (await rec.run_once(oid)).status == "indexed"
        assert at_commit == [0]
        note = await api.container.db.notes.find_one({"_id": oid})
        assert note["indexed_version"] is None and note["chunk_count"] == 0
        # The vectors went to the author's cache, so a restore embeds nothing.
        assert await api.container.db.embedding_cache.count_documents({}) == 3


@pytest.mark.parametrize("then", ["commit_refused", "commit_raises", "cancelled_at_shutdown"])
async def test_a_fenced_removal_leaves_a_restored_note_its_chunks(
    make_settings: Any, then: str
) -> None:
    """Removal A read the trashed note's chunks and stalled past its lease; the note was
    restored and B kept its intact chunks. A's late delete takes them: whatever becomes of
    A's commit (refused, raising as the database restarts, cancelled at shutdown), one
    more run must follow and write them back (from the cache, no embedding)."""
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        h, oid, ids = await indexed_then_trashed(api)
        db, a = api.container.db, api.container.indexing.reconciler
        gate_a, gate_commit = Gate(), Gate()
        gate_method(a.chunks, "delete_ids", gate_a)
        complete = a.queue.complete

        async def a_commits(*args: Any, **kwargs: Any) -> Any:
            await gate_commit.wait()
            if then == "commit_raises":
                raise AutoReconnect("connection closed (server restarting)")
            return await complete(*args, **kwargs)

        a.queue.complete = a_commits  # type: ignore[method-assign]
        task_a = asyncio.create_task(a.run_once(oid))
        await asyncio.wait_for(gate_a.entered.wait(), 30)
        past = datetime.now(UTC) - timedelta(seconds=1)
        await db.notes.update_one({"_id": oid}, {"$set": {"lease_expires_at": past}})
        assert (await api.client.post(f"/v1/notes/{oid}/restore", headers=h)).status_code == 200
        b = Reconciler(
            a.db, chunker=a.chunker, embedder=a.embedder, model_key=a.model_key, config=a.config
        )
        assert (await b.run_once(oid)).status == "indexed"
        # A restore moves the version, so B writes the chunks anew at it (from the old
        # ones' vectors); A's late delete of the ids it read must not take these either.
        kept = await db.note_chunks.find({"note_id": oid}).to_list()
        assert len(kept) == 3 and {c["_id"] for c in kept}.isdisjoint(ids)
        gate_a.release.set()
        await asyncio.wait_for(gate_commit.entered.wait(), 30)  # A deleted them
        if then == "cancelled_at_shutdown":
            task_a.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task_a
        else:
            gate_commit.release.set()
            outcome = await asyncio.wait_for(task_a, 30)
            assert outcome.status == ("lost_lease" if then == "commit_refused" else "pending")
        a.queue.complete = complete  # type: ignore[method-assign]
        recorder = RecordingEmbedder(a.embedder)
        a.embedder = recorder
        while await a.run_once(oid) is not None:
            pass
        note = await db.notes.find_one({"_id": oid})
        chunks = await db.note_chunks.find({"note_id": oid}).to_list()
        assert (note["status"], note["index_status"], note["chunk_count"]) == (
            "active",
            "indexed",
            3,
        )
        assert sorted(c["chunk_index"] for c in chunks) == [0, 1, 2]
        assert {c["note_version"] for c in chunks} == {note["indexed_version"]}
        assert recorder.texts == [] and note["last_index_stats"]["embedded"] == 0


async def test_a_run_cancelled_mid_claim_hands_the_note_back(make_settings: Any) -> None:
    """Ctrl-C of a migration lands between the claim's write and its reply: the note
    must not stay `indexing` under the dead run's lease, an edit to it waiting that lease
    out. It is handed back."""
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        h = await api.new_user()
        r = await api.client.post(
            "/v1/notes", json={"title": "N", "content_md": sectioned_note(2, seed=3)}, headers=h
        )
        oid = ObjectId(r.json()["id"])
        rec = api.container.indexing.reconciler
        claim, applied = rec.queue.claim, asyncio.Event()

        async def claim_then_hang(*args: Any, **kwargs: Any) -> Any:
            await claim(*args, **kwargs)  # the write lands; its reply never arrives
            applied.set()
            await asyncio.Event().wait()

        rec.queue.claim = claim_then_hang  # type: ignore[method-assign]
        run = asyncio.create_task(rec.run_once(oid))
        await asyncio.wait_for(applied.wait(), 30)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        rec.queue.claim = claim  # type: ignore[method-assign]
        note = await api.container.db.notes.find_one({"_id": oid})
        assert (note["index_status"], note["lease_token"], note["index_attempts"]) == (
            "pending",
            None,
            0,
        )
        assert (await rec.run_once(oid)).status == "indexed"  # at once, not after a lease
