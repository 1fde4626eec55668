"""Runs that outlive their lease, and the heartbeat that should keep them from it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from bson import ObjectId
from pymongo.errors import AutoReconnect

from tests.conftest import running_app
from tests.helpers import openai_indexing_settings, sectioned_note, wait_evicted, wait_indexed


@pytest.fixture
def openai_settings(make_settings: Any, openai_stub: Any) -> Any:
    return openai_indexing_settings(make_settings, openai_stub.base_url, autonote_index_poll_s=0.1)


def blip_first_heartbeat(api: Any) -> list[int]:
    """The first lease extension hits a transient database error (AutoReconnect), as a
    failover / restart of the embedded server does; later ones go through."""
    queue = api.container.indexing.reconciler.queue
    real = queue.extend_lease
    calls: list[int] = []

    async def extend(*args: Any, **kwargs: Any) -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise AutoReconnect("connection reset (transient)")
        return await real(*args, **kwargs)

    queue.extend_lease = extend  # type: ignore[method-assign]
    return calls


async def slow_note_with_its_lease_run_out(
    api: Any, openai_stub: Any, h: dict[str, str], sections: int, seed: int
) -> tuple[str, ObjectId]:
    """Post a note; once its run (A) is inside its (delayed) embedding request, make A's
    lease run out, as a stall longer than the lease would. The note's id and ObjectId."""
    r = await api.client.post(
        "/v1/notes",
        json={"title": "Slow", "content_md": sectioned_note(sections, seed=seed)},
        headers=h,
    )
    note_id = r.json()["id"]
    oid = ObjectId(note_id)
    for _ in range(200):
        if openai_stub.requests_to("/v1/embeddings"):
            break
        await asyncio.sleep(0.02)
    await api.container.db.notes.update_one(
        {"_id": oid}, {"$set": {"lease_expires_at": datetime.now(UTC) - timedelta(seconds=1)}}
    )
    return note_id, oid


async def test_one_heartbeat_blip_does_not_make_a_second_worker_embed_the_note(
    openai_settings: Any, openai_stub: Any
) -> None:
    """A run whose embedding takes longer than the lease keeps its lease by heartbeats.
    One transient error on a heartbeat must not end the heartbeat: else the lease runs
    out while the first run is still embedding, and another worker claims the same note
    and embeds it all again (double cost; two runs racing on one version)."""
    async with running_app(openai_settings(autonote_index_lease_s=1.5)) as api:
        h = await api.new_user()
        blip_first_heartbeat(api)
        openai_stub.set_delay(4.0, count=1)  # the first embedding request takes 4 s
        r = await api.client.post(
            "/v1/notes",
            json={"title": "Slow", "content_md": sectioned_note(4, seed=1)},
            headers=h,
        )
        note = await wait_indexed(api, h, r.json()["id"], timeout_s=30)
        await asyncio.sleep(4.5)  # let the first run finish too
        calls = openai_stub.requests_to("/v1/embeddings")
        assert note["indexed_version"] == 1
        assert len(calls) == 1, (
            f"the note was embedded {len(calls)} times: the heartbeat died on one "
            "transient error and the lease was taken over mid-run"
        )


async def test_a_run_that_lost_its_lease_leaves_the_committed_chunks_of_its_version(
    openai_settings: Any, openai_stub: Any
) -> None:
    """Two runs on the SAME version: run A stalls longer than its lease, run B takes the
    note over and commits version 1. An unfenced `delete_version(note, 1)` by A would
    delete the chunks B has just committed, before inserting its own: readers would see an
    `indexed` note with no chunks, for good if A stopped then. A checks its lease first and
    stops."""
    settings = openai_settings(autonote_index_stop_grace_s=0.2)  # default 120 s lease
    async with running_app(settings) as api:
        h = await api.new_user()
        db = api.container.db
        reconciler = api.container.indexing.reconciler
        chunks = reconciler.chunks
        real_insert = chunks.insert_version
        inserts: list[int] = []
        a_moved = asyncio.Event()  # A either starts its write or is refused

        async def insert(*args: Any, **kwargs: Any) -> Any:
            inserts.append(1)
            if len(inserts) == 2:  # run A, after B committed
                a_moved.set()
                await asyncio.sleep(3600)  # the process stops here
            return await real_insert(*args, **kwargs)

        real_may_replace = reconciler._may_replace
        decisions: list[bool] = []

        async def may_replace(*args: Any, **kwargs: Any) -> bool:
            allowed = await real_may_replace(*args, **kwargs)
            decisions.append(allowed)
            if not allowed:
                a_moved.set()
            return allowed

        chunks.insert_version = insert  # type: ignore[method-assign]
        reconciler._may_replace = may_replace  # type: ignore[method-assign]
        # (Before the fix there was no check: A went straight on to its insert.)
        openai_stub.set_delay(4.0, count=1)  # run A's embedding request takes 4 s
        # A stalls past its lease (simulated: the lease runs out now).
        note_id, oid = await slow_note_with_its_lease_run_out(api, openai_stub, h, 4, 1)
        committed = await wait_indexed(api, h, note_id, timeout_s=30)  # run B
        assert committed["chunk_count"] == 4
        await asyncio.wait_for(a_moved.wait(), 30)
        listing = (await api.client.get(f"/v1/notes/{note_id}/chunks", headers=h)).json()
        await api.container.indexing.workers.stop()  # A is cancelled if still running
        raw = await db.notes.find_one({"_id": oid})
        stored = await db.note_chunks.count_documents({"note_id": oid})
        assert raw is not None
        assert raw["index_status"] == "indexed" and raw["chunk_count"] == 4
        assert len(listing["items"]) == 4 and stored == 4
        assert decisions == [True, False] and len(inserts) == 1  # B wrote; A stopped


async def test_a_recheck_during_the_last_attempt_does_not_leave_the_note_pending(
    openai_settings: Any, openai_stub: Any
) -> None:
    """Run A stalls past its lease; run B takes the note over as a dead worker's note,
    which uses the last attempt (AUTONOTE_INDEX_MAX_ATTEMPTS=2 here; with the default 5 it
    is the same after three failed tries). A, refused at its commit, asks for one more run
    (`queue.recheck`). B then commits. The note must not stay `pending` with its attempts
    at the maximum, which no claim takes: a recheck and a successful run start the attempts
    again, and maintenance gives a stranded note its attempts back."""
    settings = openai_settings(autonote_index_max_attempts=2)
    async with running_app(settings) as api:
        h = await api.new_user()
        db = api.container.db
        openai_stub.set_delay(3.0, count=2)  # A's and B's embedding requests take 3 s
        # A stalls past its lease (simulated)
        _, oid = await slow_note_with_its_lease_run_out(api, openai_stub, h, 3, 2)
        for _ in range(200):
            if len(openai_stub.requests_to("/v1/embeddings")) == 2:
                break
            await asyncio.sleep(0.02)
        assert len(openai_stub.requests_to("/v1/embeddings")) == 2, "B took the note over"
        await asyncio.sleep(6)  # both runs are over; workers poll every 0.1 s
        await api.container.indexing.workers.maintenance_once(orphans=False)
        await asyncio.sleep(1)
        raw = await db.notes.find_one({"_id": oid})
        assert raw is not None
        state = {k: raw.get(k) for k in ("index_status", "index_attempts", "lease_token")}
        assert raw["index_status"] in ("indexed", "failed"), (
            f"note stuck: {state}, next_attempt_at {raw.get('next_attempt_at')}"
        )


async def test_a_run_whose_lease_ran_out_untaken_still_commits_its_embeddings(
    openai_settings: Any,
    openai_stub: Any,
) -> None:
    """One worker; run A's lease runs out while it embeds (an outage or stall longer than
    the lease), and nobody takes the note over meanwhile. A's commit is accepted (same
    token), so its check before the write must accept A too: checking the expiry as well
    would discard A's embeddings and embed the note a second time."""
    async with running_app(openai_settings(autonote_index_workers=1)) as api:
        h = await api.new_user()
        db = api.container.db
        openai_stub.set_delay(3.0, count=1)  # A's embedding request takes 3 s
        # A's lease runs out (nobody else can claim: the only worker is running A).
        note_id, oid = await slow_note_with_its_lease_run_out(api, openai_stub, h, 4, 3)
        note = await wait_indexed(api, h, note_id, timeout_s=30)
        assert note["indexed_version"] == 1
        raw = await db.notes.find_one({"_id": oid})
        calls = openai_stub.requests_to("/v1/embeddings")
        assert len(calls) == 1, (
            f"the note was embedded {len(calls)} times; last_index_stats "
            f"{raw and raw.get('last_index_stats')}"
        )


async def test_a_claim_whose_reply_is_lost_does_not_hold_the_note_for_a_whole_lease(
    openai_settings: Any,
) -> None:
    """The database dies after applying a claim and before replying (a SIGKILL
    mid-request): the worker sees AutoReconnect, the note says `indexing` under a lease
    nobody holds. Rather than leave it to wait out that lease (120 s by default), the worker
    hands back whatever its token holds."""
    async with running_app(openai_settings()) as api:
        h = await api.new_user()
        queue = api.container.indexing.reconciler.queue
        real = queue._take
        lost: list[dict[str, Any]] = []

        async def take_then_lose_the_reply(*args: Any, **kwargs: Any) -> Any:
            note = await real(*args, **kwargs)
            if note is not None and not lost:
                lost.append(note)
                raise AutoReconnect("connection closed")
            return note

        queue._take = take_then_lose_the_reply  # type: ignore[method-assign]
        r = await api.client.post(
            "/v1/notes", json={"title": "t", "content_md": "## A\n\nbody"}, headers=h
        )
        note = await wait_indexed(api, h, r.json()["id"], timeout_s=20)
        assert lost and str(lost[0]["_id"]) == note["id"], "the claim's reply was lost once"
        raw = await api.container.db.notes.find_one({"_id": lost[0]["_id"]})
        assert raw is not None
        assert raw["index_attempts"] == 0 and raw["lease_token"] is None


async def test_a_commit_whose_reply_was_lost_still_evicts_the_old_version(
    make_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database goes away just after applying a run's commit, before its reply: the
    run sees AutoReconnect and has not evicted the old version. Once the database answers
    again, the run finishes the eviction (not left to the maintenance sweep)."""
    from api.indexing import worker

    monkeypatch.setattr(worker, "MAINTENANCE_EVERY_S", 3600.0)  # only the run may evict
    async with running_app(make_settings(autonote_index_poll_s=0.1)) as api:
        h = await api.new_user()
        r = await api.client.post(
            "/v1/notes", json={"title": "T", "content_md": sectioned_note(4, seed=1)}, headers=h
        )
        note_id = r.json()["id"]
        oid = ObjectId(note_id)
        await wait_indexed(api, h, note_id)
        await wait_evicted(api.container.db, oid)
        queue = api.container.indexing.reconciler.queue
        real_complete = queue.complete
        lost: list[int] = []

        async def applied_then_reply_lost(*args: Any, **kwargs: Any) -> Any:
            done = await real_complete(*args, **kwargs)
            if done is not None and done.get("indexed_version") == 2 and not lost:
                lost.append(2)
                raise AutoReconnect("connection closed (server killed after the write)")
            return done

        queue.complete = applied_then_reply_lost  # type: ignore[method-assign]
        r = await api.client.patch(
            f"/v1/notes/{note_id}", json={"content_md": sectioned_note(4, seed=2)}, headers=h
        )
        assert r.json()["version"] == 2
        await wait_indexed(api, h, note_id)
        await wait_evicted(api.container.db, oid, timeout_s=10)
        assert lost == [2], "the fault was injected"
        versions = await api.container.db.note_chunks.distinct("note_version", {"note_id": oid})
        assert versions == [2]
        raw = await api.container.db.notes.find_one({"_id": oid})
        assert raw is not None and raw["index_status"] == "indexed" and raw["lease_token"] is None
