"""Legacy note documents of odd shapes, migrated on a live database.

Such a note must list, load into the local search index and migrate like any other:
`tags: "ops"` is one tag; a note without `status` is active and migrated; a list as content
fails at once with a reason; notes whose `_id` is not an ObjectId are reported failed, not
counted and left behind with exit 0.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from bson import Int64, ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from api.config import Settings
from api.migration.progress import NullProgress
from tests.conftest import running_app
from tests.helpers import wait_indexed
from tests.migration.support import run_in_process

BASE = datetime(2024, 1, 2, tzinfo=UTC)
DROP = object()
# case -> (fields of the legacy document, what GET must show: a field -> value)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "title_null": ({"title": None}, {"title": ""}),
    "title_int": ({"title": 7}, {"title": "7"}),
    # No content: one chunk all the same, so the note is found by its title.
    "content_null": ({"content_md": None}, {"content_md": "", "chunk_count": 1}),
    "tags_string": ({"tags": "ops"}, {"tags": ["ops"]}),
    "tags_mixed": ({"tags": ["ops", None, 3, {"name": "x"}, "ops"]}, {"tags": ["ops", "3"]}),
    "status_missing": ({"status": DROP}, {"status": "active", "index_status": "indexed"}),
    "created_missing": ({"created_at": DROP}, {}),
    "created_string": (
        {"created_at": "2024-01-02T00:00:00Z"},
        {"created_at": "2024-01-02T00:00:00Z"},
    ),
    "created_junk": ({"created_at": "last tuesday"}, {}),
    "updated_millis": ({"updated_at": 1_704_153_600_000}, {"updated_at": "2024-01-02T00:00:00Z"}),
}


def _legacy(author: ObjectId, fields: dict[str, Any]) -> dict[str, Any]:
    doc = {
        "title": "Legacy",
        "content_md": "## Kept\n\nlegacy body about pg_dump nightly",
        "author_id": author,
        "tags": ["ops"],
        "status": "active",
        "created_at": BASE,
    }
    for key, value in fields.items():
        if value is DROP:
            doc.pop(key)
        else:
            doc[key] = value
    return doc


@pytest.mark.parametrize("case", list(CASES))
async def test_the_api_serves_a_migrated_legacy_note(
    settings: Settings, db: AsyncDatabase, case: str
) -> None:
    fields, shown = CASES[case]
    async with running_app(settings.model_copy(update={"autonote_index_workers": 0})) as api:
        key = await api.new_user()
        author = ObjectId((await api.client.get("/v1/me", headers=key)).json()["user_id"])
        body = {"title": "Good", "content_md": "## Backup\n\npg_dump runs nightly", "tags": ["ops"]}
        good = (await api.client.post("/v1/notes", headers=key, json=body)).json()["id"]
        oid = (await db.notes.insert_one(_legacy(author, fields))).inserted_id
        code, result = await run_in_process(settings, concurrency=1)
        assert code == 0 and result["failed"] == 0, result
        got = await api.client.get(f"/v1/notes/{oid}", headers=key)
        listed = await api.client.get("/v1/notes", headers=key)
        shown_note = got.json() if got.status_code == 200 else {}
        expected = {good}
        if shown_note.get("tags") == ["ops"] and shown_note.get("chunk_count"):
            expected.add(str(oid))  # "ops" was stored as ['o', 'p', 's'] on its chunks
        query = {"query": "pg_dump", "filters": {"tags": ["ops"]}}
        for _ in range(100):  # the search index takes in the migration's commits by polling
            tagged = await api.client.post("/v1/search", headers=key, json=query)
            if tagged.status_code != 200 or all(i in tagged.text for i in expected):
                break
            await asyncio.sleep(0.1)
    assert got.status_code == 200, got.text
    note = got.json()
    for field, value in shown.items():
        assert note[field] == value, (field, note)
    assert note["index_status"] == "indexed" and note["status"] == "active"
    assert listed.status_code == 200 and {good, str(oid)} <= {
        n["id"] for n in listed.json()["items"]
    }
    assert tagged.status_code == 200, tagged.text
    assert expected <= {r["note_id"] for r in tagged.json()["results"]}
    stored = await db.notes.find_one({"_id": oid})
    assert isinstance(stored["created_at"], datetime) and isinstance(stored["updated_at"], datetime)
    assert stored.get("title", DROP) == fields.get("title", "Legacy")  # content fields untouched
    assert stored.get("tags") == fields.get("tags", ["ops"])


@pytest.mark.parametrize(
    "fields", [{"created_at": "2024-01-02T00:00:00Z"}, {"tags": [{"name": "ops"}]}], ids=str
)
async def test_the_local_search_index_loads_after_a_legacy_note(
    settings: Settings, db: AsyncDatabase, fields: dict[str, Any]
) -> None:
    """The local index read the string date / dict tag raw: every poll failed (no later
    commit was taken in) and a restart failed in the lifespan."""
    local = settings.model_copy(update={"autonote_index_workers": 0, "search_backend": "local"})
    async with running_app(local) as api:
        key = await api.new_user()
        author = ObjectId((await api.client.get("/v1/me", headers=key)).json()["user_id"])
    # Stored after the migration's enqueue would fix the date: as an older run left it.
    await db.notes.insert_one(_legacy(author, {}))
    code, _ = await run_in_process(settings, concurrency=1)
    assert code == 0
    await db.notes.update_many({}, {"$set": fields})
    async with running_app(local) as api:  # loads the index from the database
        found = await api.client.post("/v1/search", headers=key, json={"query": "pg_dump"})
    assert found.status_code == 200 and len(found.json()["results"]) == 1, found.text


async def test_unindexable_notes_fail_at_once_with_the_reason(
    settings: Settings, db: AsyncDatabase
) -> None:
    author = ObjectId()
    ids = {
        "list": (await db.notes.insert_one(_legacy(author, {"content_md": ["a"]}))).inserted_id,
        "dict_title": (await db.notes.insert_one(_legacy(author, {"title": {"a": 1}}))).inserted_id,
        "no_author": (await db.notes.insert_one(_legacy(author, {"author_id": DROP}))).inserted_id,
        # Unindexable: no read (all scoped by the ObjectId) could reach it once indexed.
        "str_author": (
            await db.notes.insert_one(_legacy(author, {"author_id": str(author)}))
        ).inserted_id,
    }
    code, result = await run_in_process(settings, concurrency=1)
    assert code == 1 and result["failed"] == 4
    notes = {d["_id"]: d async for d in db.notes.find({})}
    assert notes[ids["list"]]["index_error"].endswith(
        "content_md is a list, not text: fix the document, then re-index it"
    )
    assert "title is an object, not text" in notes[ids["dict_title"]]["index_error"]
    assert "no author_id" in notes[ids["no_author"]]["index_error"]
    assert "author_id is a str" in notes[ids["str_author"]]["index_error"]
    assert await db.note_chunks.count_documents({"note_id": ids["str_author"]}) == 0
    assert {d["index_attempts"] for d in notes.values()} == {1}  # not retried five times
    _, estimate = await run_in_process(settings, dry_run=True)
    assert {e["note_id"] for e in estimate["unchunkable"]} == {str(i) for i in ids.values()}


async def test_notes_whose_id_is_not_an_objectid_are_reported(
    settings: Settings, db: AsyncDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    author = ObjectId()
    await db.notes.insert_many([_legacy(author, {}) for _ in range(3)])
    await db.notes.insert_many(
        [{**_legacy(author, {}), "_id": "legacy-42"}, {**_legacy(author, {}), "_id": 42}]
    )
    _, estimate = await run_in_process(settings, dry_run=True)
    assert estimate["notes"] == 5 and len(estimate["unchunkable"]) == 2
    progress: list[tuple[str, int]] = []
    monkeypatch.setattr(NullProgress, "start", lambda _self, n: progress.append(("start", n)))
    monkeypatch.setattr(NullProgress, "update", lambda _self, n, **_: progress.append(("at", n)))
    for total in (5, 2):  # a rerun reports them again; nothing is silently left behind
        progress.clear()
        code, result = await run_in_process(settings, concurrency=1)
        # The two unaddressable notes are done at once: they count in the total, so the
        # progress bar never runs past it.
        assert progress[0] == ("start", total), progress
        assert all(n <= total for _, n in progress), progress
        assert code == 1 and result["failed"] == 2, result
        assert {f["note_id"] for f in result["failures"]} == {"legacy-42", "42"}
        assert all("not an ObjectId" in f["error"] for f in result["failures"])
    assert await db.notes.count_documents({"index_status": "indexed"}) == 3


async def test_listing_pages_through_migrated_notes_of_any_year(
    settings: Settings, db: AsyncDatabase
) -> None:
    """A note from 1969 does not make the listing repeat one page; one from 9999 gives a
    next_cursor the API accepts; an int32 created_at reads the same date before the
    migration and after."""
    async with running_app(settings.model_copy(update={"autonote_index_workers": 0})) as api:
        key = await api.new_user()
        author = ObjectId((await api.client.get("/v1/me", headers=key)).json()["user_id"])
        odd = ["1969-06-01T00:00:00Z", "9999-01-01T00:00:00Z", 1_704_153_600]
        ids = [
            (await db.notes.insert_one(_legacy(author, {"created_at": c}))).inserted_id for c in odd
        ]
        body = {"title": "Good", "content_md": "x"}
        ids.append(
            ObjectId((await api.client.post("/v1/notes", headers=key, json=body)).json()["id"])
        )
        before = (await api.client.get(f"/v1/notes/{ids[2]}", headers=key)).json()["created_at"]
        code, _ = await run_in_process(settings, concurrency=1)
        assert code == 0
        after = (await api.client.get(f"/v1/notes/{ids[2]}", headers=key)).json()["created_at"]
        seen: list[str] = []
        cursor = None
        for _ in range(10):
            params = {"limit": 1, **({"cursor": cursor} if cursor else {})}
            page = await api.client.get("/v1/notes", params=params, headers=key)
            assert page.status_code == 200, page.text
            seen += [n["id"] for n in page.json()["items"]]
            cursor = page.json()["next_cursor"]
            if cursor is None:
                break
    assert before == after
    assert sorted(seen) == sorted(map(str, ids)), seen
    assert seen[0] == str(ids[1]) and seen[-1] == str(ids[0])  # 9999 first, 1969 last


async def test_a_legacy_note_trashed_before_indexing_is_not_pending_forever(
    settings: Settings, db: AsyncDatabase
) -> None:
    async with running_app(settings.model_copy(update={"autonote_index_workers": 0})) as api:
        key = await api.new_user()
        author = ObjectId((await api.client.get("/v1/me", headers=key)).json()["user_id"])
        oid = (await db.notes.insert_one(_legacy(author, {"status": "trashed"}))).inserted_id
        code, result = await run_in_process(settings, concurrency=1)
        assert code == 0 and result["selected"] == 0
        note = (await api.client.get(f"/v1/notes/{oid}", headers=key)).json()
        chunks = (await api.client.get(f"/v1/notes/{oid}/chunks", headers=key)).json()
    assert (note["status"], note["index_status"], note["chunk_count"]) == ("trashed", "indexed", 0)
    assert chunks["index_status"] == "indexed" and chunks["items"] == []  # it said pending


@pytest.mark.parametrize(
    "created",
    [
        Int64(253_402_300_800_000),
        Int64(-62_135_596_800_001),
        Int64(10**15),
        3e14,
        "0000-01-01",
        "9999-12-31T23:00:00-05:00",
        "0001-01-01T00:00:00+05:00",
        "10000-01-01",
    ],
    ids=[
        "year_10000",
        "year_0",
        "1e15",
        "3e14_double",
        "s0",
        "s9999_offset",
        "s1_offset",
        "s10000",
    ],
)
async def test_a_time_past_what_a_date_holds_does_not_stop_the_migration(
    settings: Settings, db: AsyncDatabase, created: Any
) -> None:
    """Converting it would fail the server's update for the whole batch (the run would exit
    1 and index nothing after it): it reads as the _id's time."""
    author = ObjectId()
    oid = (await db.notes.insert_one(_legacy(author, {"created_at": created}))).inserted_id
    code, result = await run_in_process(settings, concurrency=1)
    assert code == 0 and result["indexed"] == 1, result
    stored = await db.notes.find_one({"_id": oid})
    assert stored["created_at"] == oid.generation_time


async def test_a_legacy_note_an_api_worker_indexed_first_is_still_normalized(
    settings: Settings, db: AsyncDatabase
) -> None:
    """An edit had an API worker index the legacy note before the migration reached it, so
    the migration never selects it for indexing. The run stores the API's shapes (a date
    `created_at`, a `status`) for every note of its filters, indexed or not, and changes
    nothing else."""
    async with running_app(settings) as api:
        key = await api.new_user()
        author = ObjectId((await api.client.get("/v1/me", headers=key)).json()["user_id"])
        fields = {"status": DROP, "created_at": "2020-02-02T00:00:00Z", "updated_at": "junk"}
        oid = (await db.notes.insert_one(_legacy(author, fields))).inserted_id
        archived = _legacy(author, {"status": "archived"})
        archived_id = (await db.notes.insert_one(archived)).inserted_id
        edit = {"content_md": "## Kept\n\nedited through the API"}
        assert (await api.client.patch(f"/v1/notes/{oid}", json=edit, headers=key)).is_success
        await wait_indexed(api, key, str(oid))
        before = await db.notes.find_one({"_id": oid})
        assert "status" not in before and before["created_at"] == "2020-02-02T00:00:00Z"
        code, trial = await run_in_process(settings, concurrency=1, limit=5)
        assert (code, trial["normalized"]) == (0, 0)  # a --limit trial touches nothing else
        code, result = await run_in_process(settings, concurrency=1, batch_size=1)
        assert (code, result["selected"], result["normalized"]) == (0, 0, 2)
        after = await db.notes.find_one({"_id": oid})
        assert after["status"] == "active"
        assert after["created_at"] == datetime(2020, 2, 2, tzinfo=UTC)  # a BSON date
        assert isinstance(after["updated_at"], datetime)  # the edit's time, kept
        assert after["updated_at"] == before["updated_at"]
        unchanged = ("title", "content_md", "tags", "version", "indexed_version", "chunk_count")
        assert {k: after[k] for k in unchanged} == {k: before[k] for k in unchanged}
        code, again = await run_in_process(settings, concurrency=1)
        assert (code, again["normalized"]) == (0, 0)
        # A status the API never writes is stored as the "trashed" it reads as, kept aside,
        # so the trashed listing (which matches "trashed" exactly) shows it.
        stored = await db.notes.find_one({"_id": archived_id})
        assert (stored["status"], stored["legacy_status"]) == ("trashed", "archived")
        assert "legacy_status" not in after
        page = await api.client.get("/v1/notes", params={"status": "trashed"}, headers=key)
        assert [n["id"] for n in page.json()["items"]] == [str(archived_id)]
