"""The notes REST API against the real embedded server: success paths, pagination,
versioning and If-Match, trash/restore/purge."""

from __future__ import annotations

import asyncio

from tests.conftest import Api

NOTE = {
    "title": "Postgres backups",
    "content_md": "## Nightly\n\nRun pg_dump at 02:00.",
    "tags": ["ops", "postgres"],
}


async def create(api: Api, headers: dict[str, str], **fields: object) -> dict:
    resp = await api.client.post("/v1/notes", json={**NOTE, **fields}, headers=headers)
    assert resp.status_code == 201, resp.text
    return resp.json()


async def test_create_returns_note_with_its_index_fields(api: Api) -> None:
    h = await api.new_user()
    resp = await api.client.post("/v1/notes", json=NOTE, headers=h)
    assert resp.status_code == 201
    note = resp.json()
    assert note["title"] == NOTE["title"] and note["content_md"] == NOTE["content_md"]
    assert note["tags"] == ["ops", "postgres"]
    assert note["version"] == 1 and note["status"] == "active"
    assert note["index_status"] == "pending"
    assert note["chunk_count"] == 0 and note["last_chunked_at"] is None
    assert note["chunking_strategy"] == "hierarchical_markdown"
    assert isinstance(note["chunking_version"], str) and note["chunking_version"]
    assert resp.headers["location"] == f"/v1/notes/{note['id']}"
    assert resp.headers["etag"] == '"1"'
    got = await api.client.get(f"/v1/notes/{note['id']}", headers=h)
    assert got.status_code == 200 and got.json()["content_md"] == NOTE["content_md"]
    # The timestamps returned are those stored (BSON keeps milliseconds, so does the
    # response: a client comparing sees no change that never happened).
    for field in ("created_at", "updated_at"):
        assert got.json()[field] == note[field]


async def test_title_is_trimmed_and_tags_deduplicated(api: Api) -> None:
    h = await api.new_user()
    note = await create(api, h, title="  Trim me  ", tags=["a", "b", "a", " b "])
    assert note["title"] == "Trim me" and note["tags"] == ["a", "b"]


async def test_list_is_newest_first_with_cursor_pagination(api: Api) -> None:
    h = await api.new_user()
    ids = [(await create(api, h, title=f"note {i}"))["id"] for i in range(25)]
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": 10, **({"cursor": cursor} if cursor else {})}
        resp = await api.client.get("/v1/notes", params=params, headers=h)
        assert resp.status_code == 200
        body = resp.json()
        assert all("content_md" not in item for item in body["items"])
        seen += [item["id"] for item in body["items"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == list(reversed(ids))


async def test_list_filters_by_tag_and_status(api: Api) -> None:
    h = await api.new_user()
    a = await create(api, h, tags=["red"])
    b = await create(api, h, tags=["blue"])
    await api.client.delete(f"/v1/notes/{b['id']}", headers=h)
    red = (await api.client.get("/v1/notes", params={"tag": "red"}, headers=h)).json()
    assert [n["id"] for n in red["items"]] == [a["id"]]
    # Compared as stored (trimmed), like search's tag filter; case counts.
    same = (await api.client.get("/v1/notes", params={"tag": " red "}, headers=h)).json()
    assert [n["id"] for n in same["items"]] == [a["id"]]
    other = (await api.client.get("/v1/notes", params={"tag": "RED"}, headers=h)).json()
    assert other["items"] == []
    blank = await api.client.get("/v1/notes", params={"tag": "  "}, headers=h)
    assert blank.status_code == 422 and blank.json()["error"] == "validation_error"
    trashed = (await api.client.get("/v1/notes", params={"status": "trashed"}, headers=h)).json()
    assert [n["id"] for n in trashed["items"]] == [b["id"]]
    active = (await api.client.get("/v1/notes", headers=h)).json()
    assert [n["id"] for n in active["items"]] == [a["id"]]


async def test_patch_bumps_version_only_on_a_real_change(api: Api) -> None:
    h = await api.new_user()
    note = await create(api, h)
    url = f"/v1/notes/{note['id']}"
    r = await api.client.patch(url, json={"tags": ["x"]}, headers=h)
    assert r.status_code == 200 and r.json()["version"] == 2 and r.json()["tags"] == ["x"]
    r = await api.client.patch(
        url, json={"tags": ["x "], "content_md": NOTE["content_md"]}, headers=h
    )
    assert r.json()["version"] == 2, "unchanged content and tags must not bump the version"
    before = r.json()["updated_at"]
    await asyncio.sleep(0.01)  # a new write would carry a later millisecond
    same = await api.client.patch(url, json={"title": NOTE["title"]}, headers=h)
    assert (same.json()["version"], same.json()["updated_at"]) == (2, before)  # no update
    r = await api.client.patch(url, json={"content_md": "changed"}, headers=h)
    assert r.json()["version"] == 3 and r.json()["index_status"] == "pending"
    r = await api.client.patch(url, json={"title": "New title"}, headers=h)
    assert r.json()["version"] == 4 and r.json()["title"] == "New title"
    assert r.headers["etag"] == '"4"'
    assert r.json()["content_md"] == "changed" and r.json()["tags"] == ["x"]


async def test_if_match_protects_a_concurrent_tag_edit(api: Api) -> None:
    """Two clients edit tags from the same read: the second must get 412, not silently
    replace the first's tags (the ETag did not change on a tag edit)."""
    h = await api.new_user()
    note = await create(api, h)
    url = f"/v1/notes/{note['id']}"
    etag = (await api.client.get(url, headers=h)).headers["etag"]
    first = await api.client.patch(url, json={"tags": ["a", "b"]}, headers={**h, "If-Match": etag})
    assert first.status_code == 200 and first.headers["etag"] != etag
    second = await api.client.patch(url, json={"tags": ["a", "c"]}, headers={**h, "If-Match": etag})
    assert second.status_code == 412
    assert (await api.client.get(url, headers=h)).json()["tags"] == ["a", "b"]


async def test_patch_with_dollar_strings_is_stored_literally(api: Api) -> None:
    h = await api.new_user()
    note = await create(api, h)
    body = {"title": "$title", "content_md": "$$NOW and $version", "tags": ["$tags"]}
    r = await api.client.patch(f"/v1/notes/{note['id']}", json=body, headers=h)
    assert r.status_code == 200
    assert {k: r.json()[k] for k in body} == body


async def test_if_match(api: Api) -> None:
    h = await api.new_user()
    note = await create(api, h)
    url = f"/v1/notes/{note['id']}"
    ok = await api.client.patch(url, json={"content_md": "v2"}, headers={**h, "If-Match": '"1"'})
    assert ok.status_code == 200 and ok.json()["version"] == 2
    stale = await api.client.patch(url, json={"content_md": "lost"}, headers={**h, "If-Match": "1"})
    assert stale.status_code == 412
    assert stale.json()["error"] == "precondition_failed"
    bad = await api.client.patch(url, json={"content_md": "x"}, headers={**h, "If-Match": "abc"})
    assert bad.status_code == 422  # If-Match must be a version number (schema pattern)
    for half in ('"2', '2"', 'W/"2', '""2""'):  # `"1` was read as 1 and the edit went in
        r = await api.client.patch(url, json={"content_md": "x"}, headers={**h, "If-Match": half})
        assert r.status_code == 422, half
    current = (await api.client.get(url, headers=h)).json()
    assert current["content_md"] == "v2" and current["version"] == 2
    # RFC 9110: "*" matches any current version (it was a 422).
    star = await api.client.patch(url, json={"content_md": "v3"}, headers={**h, "If-Match": "*"})
    assert star.status_code == 200 and star.json()["version"] == 3
    missing = url[:-6] + ("000000" if not url.endswith("000000") else "111111")
    gone = await api.client.patch(missing, json={"content_md": "x"}, headers={**h, "If-Match": "*"})
    assert gone.status_code == 404


async def test_if_match_guards_trash_restore_and_permanent_delete(api: Api) -> None:
    """RFC 9110: the condition is evaluated before the method. A stale conditional
    permanent delete is a 412, never a 204 that purges a concurrent edit unseen."""
    h = await api.new_user()
    note = await create(api, h)
    url = f"/v1/notes/{note['id']}"
    await api.client.patch(url, json={"content_md": "someone else's edit"}, headers=h)
    stale = {**h, "If-Match": '"1"'}
    purge = await api.client.delete(url, params={"permanent": "true"}, headers=stale)
    assert purge.status_code == 412 and purge.json()["error"] == "precondition_failed"
    assert "current version 2" in purge.json()["detail"]
    trash = await api.client.delete(url, headers=stale)
    assert trash.status_code == 412
    bad = await api.client.delete(url, headers={**h, "If-Match": "not-a-version"})
    assert bad.status_code == 422
    for loose in ("yes", "1", "on", "True"):  # none purges the note
        r = await api.client.delete(url, params={"permanent": loose}, headers=h)
        assert r.status_code == 422 and r.json()["error"] == "validation_error", loose
    kept = (await api.client.get(url, headers=h)).json()
    assert (kept["status"], kept["version"], kept["content_md"]) == (
        "active",
        2,
        "someone else's edit",
    )

    current = {**h, "If-Match": "2"}
    trashed = await api.client.delete(url, headers=current)
    assert (trashed.json()["status"], trashed.json()["version"]) == ("trashed", 3)
    assert trashed.headers["etag"] == '"3"'
    assert (await api.client.delete(url, headers=current)).status_code == 200  # idempotent
    assert (await api.client.post(f"{url}/restore", headers=stale)).status_code == 412
    assert (await api.client.get(url, headers=h)).json()["status"] == "trashed"
    # Client A read the note trashed (ETag 3); B restores it; A's emptying of the trash
    # with that read's If-Match must not purge the restored note (trash and restore move
    # the version).
    restored = await api.client.post(f"{url}/restore", headers={**h, "If-Match": "*"})
    assert restored.status_code == 200 and restored.json()["status"] == "active"
    assert restored.json()["version"] == 4
    seen_trashed = {**h, "If-Match": '"3"'}
    late = await api.client.delete(url, params={"permanent": "true"}, headers=seen_trashed)
    assert late.status_code == 412 and "current version 4" in late.json()["detail"]
    edit = await api.client.patch(url, json={"title": "t"}, headers=seen_trashed)
    assert edit.status_code == 412
    kept = (await api.client.get(url, headers=h)).json()
    assert (kept["status"], kept["content_md"]) == ("active", "someone else's edit")
    now_4 = {**h, "If-Match": "4"}
    gone = await api.client.delete(url, params={"permanent": "true"}, headers=now_4)
    assert gone.status_code == 204
    again = await api.client.delete(url, params={"permanent": "true"}, headers=current)
    assert again.status_code == 404
    assert await api.container.db.notes.count_documents({}) == 0


async def test_racing_trash_and_restore_without_if_match_never_412(api: Api) -> None:
    """Without If-Match no precondition was sent, so no 412: a trash that finds the note
    already restored by a concurrent request tries again."""
    h = await api.new_user()
    note = await create(api, h)
    url = f"/v1/notes/{note['id']}"
    seen: dict[int, int] = {}

    async def loop(method: str, path: str) -> None:
        for _ in range(60):
            r = await api.client.request(method, path, headers=h)
            seen[r.status_code] = seen.get(r.status_code, 0) + 1

    await asyncio.gather(
        loop("DELETE", url),
        loop("POST", f"{url}/restore"),
        loop("DELETE", url),
        loop("POST", f"{url}/restore"),
    )
    assert 412 not in seen and set(seen) <= {200, 409}, seen
    assert seen.get(200, 0) >= 230, seen


async def test_trash_restore_and_purge(api: Api) -> None:
    h = await api.new_user()
    note = await create(api, h)
    url = f"/v1/notes/{note['id']}"
    r = await api.client.delete(url, headers=h)
    assert r.status_code == 200 and r.json()["status"] == "trashed"
    assert (await api.client.get(url, headers=h)).json()["status"] == "trashed"
    r = await api.client.post(f"{url}/restore", headers=h)
    assert r.status_code == 200 and r.json()["status"] == "active"
    assert r.json()["version"] == 3  # each status change moves the ETag
    r = await api.client.delete(url, params={"permanent": "true"}, headers=h)
    assert r.status_code == 204
    assert (await api.client.get(url, headers=h)).status_code == 404
    assert await api.container.db.notes.count_documents({}) == 0


async def test_reindex_requeues(api: Api) -> None:
    h = await api.new_user()
    note = await create(api, h)
    await api.container.db.notes.update_one(
        {}, {"$set": {"index_status": "failed", "index_attempts": 5, "index_error": "boom"}}
    )
    r = await api.client.post(f"/v1/notes/{note['id']}/reindex", headers=h)
    assert r.status_code == 202
    assert r.json()["index_status"] in {"pending", "indexing", "indexed"}
    assert r.json()["index_error"] is None


async def test_fifty_concurrent_patches_never_lose_a_version(api: Api) -> None:
    h = await api.new_user()
    note = await create(api, h)
    url = f"/v1/notes/{note['id']}"
    content_changes = [
        api.client.patch(url, json={"content_md": f"edit {i}"}, headers=h) for i in range(40)
    ]
    tag_only = [api.client.patch(url, json={"tags": [f"t{i}"]}, headers=h) for i in range(10)]
    results = await asyncio.gather(*content_changes, *tag_only)
    assert all(r.status_code == 200 for r in results)
    final = (await api.client.get(url, headers=h)).json()
    assert final["version"] == 1 + 50  # every tag edit changes the tags too
    versions = sorted(r.json()["version"] for r in results)
    assert versions == list(range(2, 52)), "every change got its own version"


async def test_health_and_readiness(api: Api) -> None:
    assert (await api.client.get("/healthz")).json() == {"status": "ok"}
    r = await api.client.get("/readyz")
    assert r.status_code == 200 and r.json()["database"] == "ok"
    assert "x-request-id" in r.headers
