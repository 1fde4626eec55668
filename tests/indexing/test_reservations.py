"""Migration reservations on the real queue (`api.notes.queue`): which writes end one, and
which claims pass a reserved note over. The migration's own use is in
`tests/migration/test_live_workers.py`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bson import ObjectId

from api.migration.selection import Selection
from api.notes.migration_queue import MigrationNotes
from api.notes.queue import IndexQueue
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
        assert await notes.enqueue([fresh, legacy], _selection(api), now, reserve_until=until) == 2
        assert not await _reserved(api, fresh) and await _reserved(api, legacy)
        # Renewal keeps only live reservations; ending them hands the notes over.
        later = until + timedelta(seconds=60)
        assert await notes.renew_reservations([fresh, legacy], later, now) == 1
        assert await notes.end_reservations([fresh, legacy]) == 1
        assert not await _reserved(api, legacy)
