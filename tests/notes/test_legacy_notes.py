"""Notes written by the existing Autonote system (no `version`, no index fields) work
through the API before and after the migration indexes them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from bson import Code, Decimal128, ObjectId

from tests.conftest import Api
from tests.helpers import wait_indexed


async def test_legacy_note_reads_and_updates(api: Api) -> None:
    h = await api.new_user()
    me = (await api.client.get("/v1/me", headers=h)).json()
    legacy = {
        "title": "Old note",
        "content_md": "## Kept\n\nfrom the old system",
        "author_id": ObjectId(me["user_id"]),
        "tags": ["old"],
        "status": "active",
        "created_at": datetime(2024, 1, 2, tzinfo=UTC),
    }
    oid = (await api.container.db.notes.insert_one(legacy)).inserted_id
    url = f"/v1/notes/{oid}"
    got = await api.client.get(url, headers=h)
    assert got.status_code == 200 and got.json()["version"] == 1
    assert got.headers["etag"] == '"1"' and got.json()["updated_at"].startswith("2024-01-02")
    listed = (await api.client.get("/v1/notes", headers=h)).json()["items"]
    assert [n["id"] for n in listed] == [str(oid)]
    same = await api.client.patch(url, json={"tags": ["old"]}, headers={**h, "If-Match": "1"})
    assert same.status_code == 200 and same.json()["version"] == 1
    edit = await api.client.patch(url, json={"content_md": "new"}, headers={**h, "If-Match": "1"})
    assert edit.status_code == 200 and edit.json()["version"] == 2
    stale = await api.client.patch(url, json={"content_md": "x"}, headers={**h, "If-Match": "1"})
    assert stale.status_code == 412
    assert (await api.container.db.notes.find_one({"_id": oid}))["version"] == 2


async def insert_legacy_note(api: Api, headers: dict[str, str], version: object) -> ObjectId:
    """A note of the user behind `headers` as the legacy system stored it, with `version`."""
    me = (await api.client.get("/v1/me", headers=headers)).json()
    doc = {
        "title": "Old",
        "content_md": "text",
        "author_id": ObjectId(me["user_id"]),
        "tags": [],
        "status": "active",
        "created_at": datetime(2024, 1, 2, tzinfo=UTC),
        "version": version,
    }
    return (await api.container.db.notes.insert_one(doc)).inserted_id


@pytest.mark.parametrize(
    ("stored", "read"),
    [
        ("3", 3),
        ("+3", 3),
        (4.0, 4),
        (Decimal128("3"), 3),
        (3e9, 3_000_000_000),
        ("3000000000", 3_000_000_000),
        ("x", 1),
        (0, 1),
        ("9" * 30, 1),
    ],
)
async def test_a_malformed_legacy_version_reads_and_edits_as_a_whole_number(
    api: Api, stored: object, read: int
) -> None:
    # The legacy system left `version` as a string or a double on some notes.
    h = await api.new_user()
    oid = await insert_legacy_note(api, h, stored)
    url = f"/v1/notes/{oid}"
    got = await api.client.get(url, headers=h)
    assert got.status_code == 200 and got.json()["version"] == read
    wrong = str(read + 1)
    stale = await api.client.patch(url, json={"content_md": "x"}, headers={**h, "If-Match": wrong})
    assert stale.status_code == 412 and f"current version {read}" in stale.json()["detail"]
    assert (await api.container.db.notes.find_one({"_id": oid}))["version"] == stored
    ok = await api.client.patch(
        url, json={"content_md": "new"}, headers={**h, "If-Match": str(read)}
    )
    assert ok.status_code == 200 and ok.json()["version"] == read + 1
    stored_now = (await api.container.db.notes.find_one({"_id": oid}))["version"]
    assert stored_now == read + 1 and isinstance(stored_now, int)


async def test_the_largest_version_stays_usable_and_never_goes_down(api: Api) -> None:
    # 12 digits is what If-Match carries; legacy junk at or beyond it cannot wrap around.
    h = await api.new_user()
    biggest = 10**12 - 1
    ids = {}
    for stored in (biggest, str(biggest), 2**63 - 1, Code("3")):
        ids[repr(stored)] = await insert_legacy_note(api, h, stored)
    expect = {repr(biggest): biggest, repr(str(biggest)): biggest, repr(2**63 - 1): 1}
    expect[repr(Code("3"))] = 1  # JavaScript code is not a number, though pymongo makes it a str
    for key, oid in ids.items():
        url = f"/v1/notes/{oid}"
        got = await api.client.get(url, headers=h)
        assert got.json()["version"] == expect[key], key
        etag = got.headers["etag"]
        edit = await api.client.patch(
            url, json={"content_md": "new"}, headers={**h, "If-Match": etag}
        )
        assert edit.status_code == 200, (key, edit.text)
        after = edit.json()["version"]
        assert after == min(expect[key] + 1, biggest) and after >= expect[key], key


async def test_legacy_notes_without_status_are_listed_searched_trashed_and_restored(
    api: Api,
) -> None:
    """A note with no `status` is active, and one with a status this app never wrote
    ("archived") is not, in every query as in `note_status`: a legacy note an API worker
    indexed (after an edit) is in listings and search, and trashing or restoring it works
    (not a 409 "keeps changing")."""
    h = await api.new_user()
    me = ObjectId((await api.client.get("/v1/me", headers=h)).json()["user_id"])
    base = {"author_id": me, "tags": [], "created_at": datetime(2024, 1, 2, tzinfo=UTC)}
    bare = {**base, "title": "Bare", "content_md": "## Quokka\n\nThe quokka census ran in May."}
    archived = {**base, "title": "Archived", "content_md": "old", "status": "archived"}
    bare_id = (await api.container.db.notes.insert_one(bare)).inserted_id
    archived_id = (await api.container.db.notes.insert_one(archived)).inserted_id
    url = f"/v1/notes/{bare_id}"

    async def listed(status: str) -> list[str]:
        page = await api.client.get("/v1/notes", params={"status": status}, headers=h)
        return [n["id"] for n in page.json()["items"]]

    assert await listed("active") == [str(bare_id)]
    # Listed under "trashed" once the migration stored it so (`LISTED_STATUS`); read as
    # trashed already.
    assert await listed("trashed") == []
    got = await api.client.get(f"/v1/notes/{archived_id}", headers=h)
    assert got.json()["status"] == "trashed"
    edit = await api.client.patch(
        url, json={"content_md": bare["content_md"] + " Again."}, headers=h
    )
    assert edit.status_code == 200
    await wait_indexed(api, h, str(bare_id))
    assert "status" not in await api.container.db.notes.find_one({"_id": bare_id})
    found = await api.client.post("/v1/search", json={"query": "quokka census"}, headers=h)
    assert [r["note_id"] for r in found.json()["results"]] == [str(bare_id)]

    trashed = await api.client.delete(url, headers=h)
    assert trashed.status_code == 200 and trashed.json()["status"] == "trashed"
    assert await listed("active") == []
    restored = await api.client.post(f"{url}/restore", headers=h)
    assert restored.status_code == 200 and restored.json()["status"] == "active"
    back = await api.client.post(f"/v1/notes/{archived_id}/restore", headers=h)
    assert back.status_code == 200 and back.json()["status"] == "active"
    again = await api.client.delete(f"/v1/notes/{archived_id}", headers=h)
    assert again.status_code == 200 and again.json()["status"] == "trashed"
