"""`external_id`: a client's key for a note, unique per user. `PUT /v1/notes/by-external-id`
creates or updates by it (an upsert that changes nothing changes nothing), listings filter
by key prefix in key order, and one user's key never reaches another user's note."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.conftest import Api
from tests.helpers import wait_indexed

URL = "/v1/notes/by-external-id"
BODY = (
    "## Nightly\n\nRun pg_dump at 02:00 and copy the dump to the backup host.\n\n"
    "## Restore\n\nUse pg_restore --clean on a scratch database first.\n\n"
    "## Retention\n\nKeep fourteen daily dumps and six monthly ones.\n"
)


def note(key: str, **fields: Any) -> dict[str, Any]:
    return {"external_id": key, "title": "Backups", "content_md": BODY, "tags": ["ops"], **fields}


FIELDS = ("author_id", "title", "content_md", "tags", "external_id", "status", "version")


async def note_fields(api: Api) -> list[dict[str, Any]]:
    """What a client wrote, of every note (not the indexer's own fields)."""
    projection = {**dict.fromkeys(FIELDS, 1), "updated_at": 1, "created_at": 1}
    return await api.container.db.notes.find({}, projection).sort("_id", 1).to_list()


async def count_notes(api: Api) -> int:
    return await api.container.db.notes.count_documents({})


async def test_upsert_creates_then_changes_nothing_then_updates_only_what_changed(
    api: Api,
) -> None:
    h = await api.new_user()
    created = await api.client.put(URL, json=note("ops/backups.md"), headers=h)
    assert created.status_code == 201, created.text
    first = created.json()
    assert created.headers["location"] == f"/v1/notes/{first['id']}"
    assert first["external_id"] == "ops/backups.md" and first["folder"] == "ops"
    assert first["version"] == 1 and created.headers["etag"] == '"1"'
    indexed = await wait_indexed(api, h, first["id"])
    assert indexed["last_index_stats"]["embedded"] == 3
    queue = ("changed_at", "next_attempt_at", "index_status", "indexed_version")
    stored = await note_fields(api)
    queued = await api.container.db.notes.find_one({}, dict.fromkeys(queue, 1))

    # The same note again: 200, and not one field of the stored document moves.
    again = await api.client.put(URL, json=note("ops/backups.md"), headers=h)
    assert again.status_code == 200 and again.json()["id"] == first["id"]
    assert again.json()["version"] == 1 and again.json()["updated_at"] == first["updated_at"]
    assert await note_fields(api) == stored
    assert await api.container.db.notes.find_one({}, dict.fromkeys(queue, 1)) == queued

    # One section edited: version + 1, and only that section is embedded again.
    edited = BODY.replace("fourteen daily", "thirty daily")
    changed = await api.client.put(URL, json=note("ops/backups.md", content_md=edited), headers=h)
    assert changed.status_code == 200 and changed.json()["version"] == 2
    assert changed.json()["updated_at"] > first["updated_at"]
    after = await wait_indexed(api, h, first["id"])
    stats = after["last_index_stats"]
    assert (stats["chunks"], stats["embedded"], stats["reused"]) == (3, 1, 2)
    assert await count_notes(api) == 1


async def test_tags_omitted_means_none_and_a_trashed_note_is_restored(api: Api) -> None:
    h = await api.new_user()
    first = (await api.client.put(URL, json=note("a.md"), headers=h)).json()
    trashed = await api.client.delete(f"/v1/notes/{first['id']}", headers=h)
    assert trashed.json()["status"] == "trashed"
    body = {"external_id": "a.md", "title": "Backups", "content_md": BODY}
    back = await api.client.put(URL, json=body, headers=h)
    assert back.status_code == 200, back.text
    restored = back.json()
    assert restored["id"] == first["id"] and restored["status"] == "active"
    assert restored["tags"] == [] and restored["version"] == trashed.json()["version"] + 1


async def test_concurrent_upserts_of_a_new_key_make_one_note(api: Api) -> None:
    h = await api.new_user()
    bodies = [note("race.md", content_md=f"Version {i}.") for i in range(8)]
    answers = await asyncio.gather(*(api.client.put(URL, json=b, headers=h) for b in bodies))
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [200] * 7 + [201], [r.text for r in answers]
    assert len({r.json()["id"] for r in answers}) == 1
    assert await api.container.db.notes.count_documents({"external_id": "race.md"}) == 1


async def test_bad_keys_are_refused_and_change_nothing(api: Api) -> None:
    h = await api.new_user()
    await api.client.put(URL, json=note("kept.md"), headers=h)
    before = await note_fields(api)
    bad: list[dict[str, Any]] = [
        {"title": "No key", "content_md": "x"},
        note(""),
        note("   "),
        note("x" * 1025),
        note("line\nbreak.md"),
        note("nul\x00.md"),
        note("tab\there.md"),
        note("del\x7f.md"),
        note("sep\u2028.md"),
        note(None),
        note(["a.md"]),
        {**note("kept.md"), "unknown": 1},
    ]
    for body in bad:
        resp = await api.client.put(URL, json=body, headers=h)
        assert resp.status_code == 422, (body.get("external_id"), resp.text)
        assert resp.json()["error"] == "validation_error"
    # JSON may carry a lone surrogate, which no key (stored as UTF-8) can hold.
    raw = json.dumps(note("\ud800.md")).encode()
    lone = await api.client.put(URL, content=raw, headers={**h, "Content-Type": "application/json"})
    assert lone.status_code == 422, lone.text
    assert await note_fields(api) == before
    assert (await api.client.put(URL, json=note("x" * 1024), headers=h)).status_code == 201


async def test_one_users_key_never_reaches_another_users_note(api: Api) -> None:
    alice, bob = await api.new_user("alice"), await api.new_user("bob")
    hers = (await api.client.put(URL, json=note("diary/secret.md"), headers=alice)).json()
    stored = await note_fields(api)
    # Bob's upsert of the same key makes Bob's own note; Alice's is untouched.
    his = await api.client.put(
        URL, json=note("diary/secret.md", content_md="Bob's own text."), headers=bob
    )
    assert his.status_code == 201 and his.json()["id"] != hers["id"]
    assert [n for n in await note_fields(api) if str(n["_id"]) == hers["id"]] == stored
    listed = await api.client.get("/v1/notes", params={"external_id_prefix": "diary/"}, headers=bob)
    assert [n["id"] for n in listed.json()["items"]] == [his.json()["id"]]
    assert (await api.client.get(f"/v1/notes/{hers['id']}", headers=bob)).status_code == 404
    # Bob cannot move his note onto Alice's key space either: keys are per user.
    moved = await api.client.patch(
        f"/v1/notes/{his.json()['id']}", json={"external_id": "diary/other.md"}, headers=bob
    )
    assert moved.status_code == 200
    assert [n for n in await note_fields(api) if str(n["_id"]) == hers["id"]] == stored


async def test_prefix_listing_pages_in_key_order(api: Api) -> None:
    h = await api.new_user()
    keys = ["a/3.md", "a/1.md", "a/sub/2.md", "a.md", "ab/1.md", "b/1.md", "a/é.md"]
    for key in keys:
        assert (await api.client.put(URL, json=note(key), headers=h)).status_code == 201
    await api.client.post("/v1/notes", json={"title": "No key", "content_md": "x"}, headers=h)
    seen: list[str] = []
    cursor = None
    while True:
        params = {"external_id_prefix": "a/", "limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await api.client.get("/v1/notes", params=params, headers=h)).json()
        seen += [n["external_id"] for n in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ["a/1.md", "a/3.md", "a/sub/2.md", "a/é.md"]
    everything = await api.client.get(
        "/v1/notes", params={"external_id_prefix": "", "limit": 100}, headers=h
    )
    assert [n["external_id"] for n in everything.json()["items"]] == sorted(keys)
    # A trashed note leaves the active listing and shows in the trashed one.
    first = everything.json()["items"][0]
    await api.client.delete(f"/v1/notes/{first['id']}", headers=h)
    active = await api.client.get("/v1/notes", params={"external_id_prefix": "a"}, headers=h)
    assert first["id"] not in [n["id"] for n in active.json()["items"]]
    trashed = await api.client.get(
        "/v1/notes", params={"external_id_prefix": "a", "status": "trashed"}, headers=h
    )
    assert [n["id"] for n in trashed.json()["items"]] == [first["id"]]


async def test_any_cursor_of_the_pattern_is_a_position(api: Api) -> None:
    h = await api.new_user()
    for cursor in ("kA", "k_-_", "k" + "A" * 5462, "-5-" + "0" * 24, "k/8"):
        resp = await api.client.get("/v1/notes", params={"cursor": cursor}, headers=h)
        expected = 422 if cursor == "k/8" else 200
        assert resp.status_code == expected, (cursor, resp.text)


async def test_patching_a_key_keeps_the_note_and_refuses_a_taken_key(api: Api) -> None:
    h = await api.new_user()
    one = (await api.client.put(URL, json=note("one.md"), headers=h)).json()
    two = (await api.client.put(URL, json=note("two.md"), headers=h)).json()
    await wait_indexed(api, h, one["id"])
    moved = await api.client.patch(
        f"/v1/notes/{one['id']}", json={"external_id": "dir/uno.md"}, headers=h
    )
    assert moved.status_code == 200, moved.text
    assert moved.json()["external_id"] == "dir/uno.md" and moved.json()["folder"] == "dir"
    # A new key is no new version: nothing to index.
    assert moved.json()["version"] == 1 and moved.json()["index_status"] == "indexed"
    taken = await api.client.patch(
        f"/v1/notes/{one['id']}", json={"external_id": "two.md"}, headers=h
    )
    assert taken.status_code == 409 and taken.json()["error"] == "conflict"
    assert (await api.client.get(f"/v1/notes/{two['id']}", headers=h)).json()["external_id"] == (
        "two.md"
    )
    null = await api.client.patch(f"/v1/notes/{one['id']}", json={"external_id": None}, headers=h)
    assert null.status_code == 422
