"""Migration reservations on the real queue (`api.indexing.queue`): which writes end one, and
which claims pass a reserved note over. The migration's own use is in
`tests/migration/test_live_workers.py`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bson import ObjectId

from api.indexing.queue import IndexQueue
from api.migration.repository import MigrationNotes
from api.migration.selection import Selection
from api.providers import embedding_model_key
from tests.conftest import Api, running_app
from tests.migration.support import insert_legacy

LEASE = {"token": "t", "lease_s": 30.0, "max_attempts": 5}


def _selection(api: Api) -> Selection:
    container = api.container
    return Selection(container.chunker.version, embedding_model_key(container.embedder))


async def _reserve(api: Api, ids: list[ObjectId], for_s: float = 60.0) -> datetime:
    now = datetime.now(UTC)
    until = now + timedelta(seconds=for_s)
    notes = MigrationNotes(api.container.db)
    assert await notes.enqueue(ids, _selection(api), now, reserve_until=until) == len(ids)
    return until


async def _reserved(api: Api, note_id: ObjectId) -> bool:
    note = await api.container.db.notes.find_one({"_id": note_id})
    until = note.get("reserved_until")
    return until is not None and until.replace(tzinfo=UTC) > datetime.now(UTC)


async def test_claims_pass_reserved_notes_over_unless_they_name_one(make_settings: Any) -> None:
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        db = api.container.db
        author = ObjectId()
        ids = await insert_legacy(db, 2, [author])
        await _reserve(api, ids)
        queue = IndexQueue(db)
        now = datetime.now(UTC) + timedelta(seconds=1)
        assert await queue.due_authors(now) == []
        assert not await queue.others_due(ObjectId(), now)
        assert await queue.claim(now=now, **LEASE) is None
        assert await queue.claim_for_author(author, now=now, **LEASE) is None
        named = await queue.claim(now=now, note_id=ids[0], **LEASE)
        assert named is not None and named["_id"] == ids[0]
        # The named claim's run died (lease out): still passed over while reserved...
        later = now + timedelta(seconds=45)
        assert await queue.claim_stale(now=later, **LEASE) is None
        # ...and once the reservation has run out, anyone's.
        expired = now + timedelta(seconds=90)
        assert await queue.due_authors(expired) == [author]
        stale = await queue.claim_stale(now=expired, **LEASE)
        assert stale is not None and stale["_id"] == ids[0]
        other = await queue.claim(now=expired, **LEASE)
        assert other is not None and other["_id"] == ids[1]


async def test_a_users_write_ends_the_reservation_and_indexing_clears_it(
    make_settings: Any,
) -> None:
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        db = api.container.db
        headers = await api.new_user()
        owner = ObjectId((await api.client.get("/v1/me", headers=headers)).json()["user_id"])
        edited, trashed, untouched, indexed = await insert_legacy(db, 4, [owner])
        await _reserve(api, [edited, trashed, untouched, indexed])

        # A write that changes nothing is no new work: the note stays the migration's.
        same = await db.notes.find_one({"_id": untouched})
        r = await api.client.patch(
            f"/v1/notes/{untouched}", headers=headers, json={"content_md": same["content_md"]}
        )
        assert r.status_code == 200 and await _reserved(api, untouched)

        r = await api.client.patch(
            f"/v1/notes/{edited}", headers=headers, json={"content_md": "## new\n\ntext"}
        )
        assert r.status_code == 200 and not await _reserved(api, edited)
        assert (await api.client.delete(f"/v1/notes/{trashed}", headers=headers)).is_success
        assert not await _reserved(api, trashed)

        outcome = await api.container.indexing.reconciler.run_once(indexed)
        assert outcome is not None and outcome.status == "indexed"
        assert not await _reserved(api, indexed)
        # The edited and trashed notes are the workers' now; the untouched one is not.
        queue = IndexQueue(db)
        claimed = set()
        while (note := await queue.claim(now=datetime.now(UTC), **LEASE)) is not None:
            claimed.add(note["_id"])
        assert claimed == {edited, trashed}


async def test_enqueueing_leaves_a_note_already_queued_for_the_workers_to_them(
    make_settings: Any,
) -> None:
    """A note a user wrote and no worker has taken yet is not reserved by a migration that
    reaches it: the workers take it as soon as they would have."""
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        headers = await api.new_user()
        r = await api.client.post(
            "/v1/notes", headers=headers, json={"title": "t", "content_md": "# a\n\nb"}
        )
        fresh = ObjectId(r.json()["id"])
        legacy = (await insert_legacy(api.container.db, 1, [ObjectId()]))[0]
        now = datetime.now(UTC)
        notes = MigrationNotes(api.container.db)
        until = now + timedelta(seconds=60)
        before = await api.container.db.notes.find_one({"_id": fresh})
        # The user's note is left exactly as its write queued it (only the legacy one moves).
        assert await notes.enqueue([fresh, legacy], _selection(api), now, reserve_until=until) == 1
        assert await api.container.db.notes.find_one({"_id": fresh}) == before
        assert not await _reserved(api, fresh) and await _reserved(api, legacy)
        # Renewal keeps only reservations nothing cleared; ending them hands the notes over.
        later = until + timedelta(seconds=60)
        assert await notes.renew_reservations([fresh, legacy], later) == 1
        assert await notes.end_reservations([fresh, legacy]) == 1
        assert not await _reserved(api, legacy)
        # A reservation that ran out (a missed renewal) is renewed while its note waits.
        lapsed = (await insert_legacy(api.container.db, 1, [ObjectId()], start=1))[0]
        gone = now - timedelta(seconds=1)
        assert await notes.enqueue([lapsed], _selection(api), now, reserve_until=gone) == 1
        assert not await _reserved(api, lapsed)
        assert await notes.renew_reservations([lapsed], later) == 1
        assert await _reserved(api, lapsed)


async def test_notes_requeued_for_a_new_chunker_are_reserved(make_settings: Any) -> None:
    """Every API or worker process re-queues, at start-up, the notes another chunker or
    model made (`requeue_stale`): pending and unreserved, but no user's write. The
    migration reaching them reserves them (they are not left to the workers)."""
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        db = api.container.db
        ids = await insert_legacy(db, 6, [ObjectId()])
        await db.notes.update_many(
            {"_id": {"$in": ids}},
            [
                {
                    "$set": {
                        "index_status": "indexed",
                        "indexed_version": {"$ifNull": ["$version", 1]},
                        "chunking_version": "an older chunker",
                        "embedding_model": "an older model",
                        "chunk_count": 1,
                        "changed_at": datetime(2024, 1, 1, tzinfo=UTC),
                    }
                }
            ],
        )
        selection = _selection(api)
        requeued = await IndexQueue(db).requeue_stale(
            chunking_version=selection.chunking_version,
            embedding_model=selection.embedding_model,
            now=datetime.now(UTC),
        )
        assert requeued == 6
        await _reserve(api, ids)
        assert [await _reserved(api, i) for i in ids] == [True] * 6


async def test_a_users_write_whose_worker_died_stays_the_workers(make_settings: Any) -> None:
    """A user's note claimed by a worker that died (lease out) is still a user's write:
    enqueueing leaves it unreserved, so the workers recover it at once instead of when the
    migration's loops reach it."""
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        db = api.container.db
        headers = await api.new_user()
        r = await api.client.post(
            "/v1/notes", headers=headers, json={"title": "t", "content_md": "# a\n\nuser text"}
        )
        note_id = ObjectId(r.json()["id"])
        queue = IndexQueue(db)
        claimed = await queue.claim(now=datetime.now(UTC), **{**LEASE, "lease_s": 0.01})
        assert claimed is not None and claimed["_id"] == note_id
        now = datetime.now(UTC) + timedelta(seconds=1)  # the lease has run out
        notes = MigrationNotes(db)
        until = now + timedelta(seconds=60)
        # Left as the dead run left it: unreserved, its attempt counted (`enqueue_update`).
        assert await notes.enqueue([note_id], _selection(api), now, reserve_until=until) == 0
        assert not await _reserved(api, note_id)
        taken = await queue.claim_stale(now=now, **LEASE)
        assert taken is not None and taken["_id"] == note_id


async def test_a_released_legacy_note_is_reserved_again_by_the_rerun(
    make_settings: Any,
) -> None:
    """Enqueueing fills a legacy note's missing `changed_at`, a millisecond before the
    re-queue's own stamp, so it never reads as a user's write once its reservation ended
    (Ctrl-C, or a killed run's ran out): the rerun reserves such notes again."""
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        ids = await insert_legacy(api.container.db, 3, [ObjectId()])
        await _reserve(api, ids)
        assert await MigrationNotes(api.container.db).end_reservations(ids) == 3
        await _reserve(api, ids)  # the rerun
        assert [await _reserved(api, i) for i in ids] == [True] * 3
