"""The migration beside the API's own indexing workers (the default: two per API process).

The workers pass over the notes the migration reserved, so the backlog is indexed within
the migration's `--concurrency` and rate limits, and a user's write is theirs at once (not
behind that user's whole backlog).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from api.config import Settings
from api.db.client import ensure_indexes
from api.indexing.runtime import build_indexing
from api.migration import drive as drive_rules
from api.migration.limiter import RateLimitedEmbedder
from api.migration.repository import MigrationNotes
from api.migration.runner import MigrationRunner
from api.migration.selection import Selection
from api.providers import build_chunker, build_embedder, embedding_model_key
from tests.conftest import Api, running_app
from tests.migration.support import (
    check_all_indexed,
    chunker_for,
    insert_legacy,
    reserved_now,
    run_in_process,
    waiting_and_unreserved,
)


async def _user(api: Api) -> tuple[dict[str, str], ObjectId]:
    headers = await api.new_user("legacy owner")
    me = (await api.client.get("/v1/me", headers=headers)).json()
    return headers, ObjectId(me["user_id"])


async def _indexed_at(db: AsyncDatabase, note_id: ObjectId, version: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        note = await db.notes.find_one({"_id": note_id})
        if note["index_status"] == "indexed" and note["indexed_version"] == version:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"note {note_id} not indexed at version {version} in {timeout_s} s")


class CrawlThenHold(RateLimitedEmbedder):
    """The migration's embedder: a crawl (a burst of 10 requests, then one every 0.1 s)
    for `crawled` calls, then held until `release` is set."""

    def __init__(self, inner: Any, *, crawled: int) -> None:
        super().__init__(inner, tokens_per_period=None, requests_per_period=10, period_s=1.0)
        self.crawled = crawled
        self.calls = 0
        self.release = asyncio.Event()

    async def embed(self, texts: list[str], **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls > self.crawled:
            await self.release.wait()
        return await super().embed(texts, **kwargs)


async def test_the_api_workers_leave_the_migrations_notes_to_it(make_settings: Any) -> None:
    """Every note is indexed by the migration itself, so `embedded` and `tokens_embedded`
    are the whole cost and `--concurrency`/rate limits bound all of it."""
    settings = make_settings()
    assert settings.autonote_index_workers == 2
    async with running_app(settings) as api:
        db = api.container.db
        _, owner = await _user(api)
        ids = await insert_legacy(db, 40, [owner])
        code, result = await run_in_process(settings, concurrency=1, batch_size=40)
        assert code == 0, result
        assert result["indexed"] == 40 and result["indexed_by_other_workers"] == 0, result
        chunks = await check_all_indexed(db, chunker_for(settings), ids)
        assert result["chunks"] == chunks and result["embedded"] + result["reused"] == chunks
        # Nothing is left reserved: a later edit is any worker's at once.
        assert await db.notes.count_documents({"reserved_until": {"$ne": None}}) == 0


async def test_a_users_edit_does_not_wait_behind_their_migrating_backlog(
    make_settings: Any,
) -> None:
    """The migration crawls (a request-rate limit); the user edits a note meanwhile. The
    API's workers index the edit at once, before the backlog, and leave the backlog to the
    migration. Stopping the migration hands what it reserved back to the workers."""
    settings = make_settings(autonote_index_backoff_base_s=0.05)
    async with running_app(settings) as api:
        db = api.container.db
        headers, owner = await _user(api)
        created = await api.client.post(
            "/v1/notes", headers=headers, json={"title": "live", "content_md": "## x\n\nfirst"}
        )
        live = ObjectId(created.json()["id"])
        await _indexed_at(db, live, 1, 30)
        backlog = await insert_legacy(db, 120, [owner])

        embedder = build_embedder(settings, None)
        chunker = build_chunker(settings, embedder)
        slow = CrawlThenHold(embedder, crawled=10)
        indexing = build_indexing(settings, db, chunker=chunker, embedder=slow, concurrency=1)
        selection = Selection(chunker.version, embedding_model_key(embedder))
        runner = MigrationRunner(indexing.reconciler, MigrationNotes(db), selection, concurrency=1)
        migration = asyncio.create_task(runner.run())
        try:
            for _ in range(500):  # the whole backlog is enqueued and reserved
                if await reserved_now(db):
                    break
                await asyncio.sleep(0.02)
            patched = await api.client.patch(
                f"/v1/notes/{live}", headers=headers, json={"content_md": "## x\n\nsecond"}
            )
            assert patched.json()["version"] == 2
            # The migration is held after 10 notes: behind the backlog, the edit would wait
            # for ever (and fail at the 60 s bound).
            await _indexed_at(db, live, 2, 60)
            done = await db.notes.count_documents(
                {"_id": {"$in": backlog}, "index_status": "indexed"}
            )
            assert done <= slow.crawled, done  # the workers took the edit, not the backlog
            assert not migration.done()
            assert runner.stats.indexed_by_others == 0
        finally:
            slow.release.set()
            migration.cancel()
            await asyncio.gather(migration, return_exceptions=True)
            await slow.aclose()
        # Stopped: its reservations ended, so the API's workers finish the backlog.
        assert await reserved_now(db) == 0
        # What is checked is that they finish, not how fast: 120 notes embedded locally took
        # over 60 s on a 2-core machine busy with another job (a fresh-clone run failed so).
        deadline = time.monotonic() + 180
        while await db.notes.count_documents({"index_status": {"$ne": "indexed"}}):
            assert time.monotonic() < deadline, "the workers did not finish the backlog"
            await asyncio.sleep(0.1)
        await check_all_indexed(db, chunker, [live, *backlog])


async def test_a_killed_runs_reservations_run_out(settings: Settings, db: AsyncDatabase) -> None:
    """A run that dies without ending its reservations (SIGKILL) leaves them to run out:
    until then only a claim by id (a rerun) takes the notes; after, any worker does."""
    await ensure_indexes(db)
    ids = await insert_legacy(db, 3, [ObjectId()])
    embedder = build_embedder(settings, None)
    chunker = build_chunker(settings, embedder)
    indexing = build_indexing(settings, db, chunker=chunker, embedder=embedder, concurrency=1)
    reconciler = indexing.reconciler
    selection = Selection(chunker.version, embedding_model_key(embedder))
    notes = MigrationNotes(db)
    now = datetime.now(UTC)
    until = now + timedelta(seconds=3)  # room for a loaded machine before the first claim
    assert await notes.enqueue(ids, selection, now, reserve_until=until)
    assert await reconciler.run_once() is None, "a worker took a reserved note"
    taken = await reconciler.run_once(ids[0])  # a rerun names its notes
    assert taken is not None and taken.status == "indexed"
    await asyncio.sleep((until - datetime.now(UTC)).total_seconds() + 0.1)
    assert {(await reconciler.run_once()).note_id for _ in range(2)} == set(ids[1:])
    await embedder.aclose()
    await check_all_indexed(db, chunker, ids)


async def test_reservations_outlive_their_term_while_the_run_lives(
    settings: Settings, db: AsyncDatabase
) -> None:
    """A run slower than `reserve_s` renews its reservations (a crawling, rate-limited
    migration of a large backlog must not hand it to the workers halfway)."""
    await ensure_indexes(db)
    ids = await insert_legacy(db, 16, [ObjectId()])
    embedder = build_embedder(settings, None)
    chunker = build_chunker(settings, embedder)
    slow = RateLimitedEmbedder(embedder, tokens_per_period=None, requests_per_period=2, period_s=1)
    indexing = build_indexing(settings, db, chunker=chunker, embedder=slow, concurrency=1)
    selection = Selection(chunker.version, embedding_model_key(embedder))
    # A 1.5 s term renewed every 0.5 s: a loaded machine's event loop may stall for 1 s.
    runner = MigrationRunner(
        indexing.reconciler, MigrationNotes(db), selection, concurrency=1, reserve_s=1.5
    )
    migration = asyncio.create_task(runner.run())
    await asyncio.sleep(3.5)  # past two terms; 2 notes a second leave at least 4 of 16
    # One read: counting the waiting notes and the live reservations in two reads would
    # race the run completing a note between them.
    waiting, unreserved = await waiting_and_unreserved(db, ids)
    assert waiting >= 4 and unreserved == 0, (waiting, unreserved)
    assert await indexing.reconciler.run_once() is None, "a worker took a reserved note"
    stats = await migration
    await slow.aclose()
    assert stats.indexed == 16 and stats.indexed_by_others == 0
    await check_all_indexed(db, chunker, ids)


async def test_an_edit_during_the_migrations_run_of_the_note_goes_to_the_workers(
    make_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The edit ends the reservation and the run completes the note as pending. The per-note
    loop does not claim it again at once (the user's edit would wait for the migration's
    saturated rate limiter): it leaves a user's write to the workers for `WORKERS_FIRST_S`
    and finds it indexed by them (here 5 s, so a loaded machine's slow worker poll cannot
    fail the test)."""
    monkeypatch.setattr(drive_rules, "WORKERS_FIRST_S", 5.0)
    settings = make_settings()
    async with running_app(settings) as api:
        db = api.container.db
        headers, owner = await _user(api)
        backlog = await insert_legacy(db, 12, [owner])
        embedder = build_embedder(settings, None)
        chunker = build_chunker(settings, embedder)
        edited = asyncio.Event()

        class HeldUntilTheEdit:
            """The migration's embedder: its first run embeds only once the edit landed."""

            def __getattr__(self, name: str) -> Any:
                return getattr(embedder, name)

            async def embed(self, texts: list[str], **kwargs: Any) -> Any:
                await edited.wait()
                return await embedder.embed(texts, **kwargs)

        indexing = build_indexing(
            settings, db, chunker=chunker, embedder=HeldUntilTheEdit(), concurrency=1
        )
        reconciler = indexing.reconciler
        runs: list[tuple[ObjectId | None, str | None]] = []
        run_once = reconciler.run_once

        async def recording(note_id: ObjectId | None = None) -> Any:
            outcome = await run_once(note_id)
            runs.append((note_id, None if outcome is None else outcome.status))
            return outcome

        reconciler.run_once = recording  # type: ignore[method-assign]
        selection = Selection(chunker.version, embedding_model_key(embedder))
        runner = MigrationRunner(reconciler, MigrationNotes(db), selection, concurrency=1)
        migration = asyncio.create_task(runner.run())
        try:
            target = None
            for _ in range(3000):
                target = await db.notes.find_one(
                    {"lease_token": {"$regex": f"^{reconciler.worker_id}"}}
                )
                if target is not None:
                    break
                await asyncio.sleep(0.005)
            assert target is not None, "the migration never claimed a note"
            note_id = target["_id"]
            r = await api.client.patch(
                f"/v1/notes/{note_id}", headers=headers, json={"content_md": "## new\n\nwords"}
            )
            edited.set()
            await _indexed_at(db, note_id, r.json()["version"], 30)
            stats = await asyncio.wait_for(migration, 60)
        finally:
            edited.set()
            migration.cancel()
            await asyncio.gather(migration, return_exceptions=True)
            await embedder.aclose()
        mine = [s for n, s in runs if n == note_id]
        # One run by the migration, which the edit overtook; the workers did the edit.
        assert mine[0] == "pending" and set(mine[1:]) <= {None}, mine
        assert stats.done == 12 and stats.indexed_by_others == 1, stats
        await check_all_indexed(db, chunker, backlog)
