"""User A can never read, list, change, delete, restore or re-index user B's notes, and the
answer is always 404 (never a 403 that would confirm the note exists)."""

from __future__ import annotations

from tests.conftest import Api


async def test_other_users_notes_are_invisible(api: Api) -> None:
    alice = await api.new_user("alice")
    bob = await api.new_user("bob")
    note = (
        await api.client.post(
            "/v1/notes",
            json={"title": "Alice private", "content_md": "secret", "tags": ["p"]},
            headers=alice,
        )
    ).json()
    url = f"/v1/notes/{note['id']}"
    fields = {"title": 1, "content_md": 1, "tags": 1, "version": 1, "status": 1}
    before = await api.container.db.notes.find_one({}, fields)

    attempts = [
        ("GET", url, {}),
        ("PATCH", url, {"json": {"content_md": "hijacked"}}),
        ("PATCH", url, {"json": {"tags": ["x"]}, "headers": {"If-Match": "1"}}),
        ("DELETE", url, {}),
        ("DELETE", url, {"params": {"permanent": "true"}}),
        ("POST", f"{url}/restore", {}),
        ("POST", f"{url}/reindex", {}),
    ]
    for method, target, kwargs in attempts:
        headers = {**bob, **kwargs.pop("headers", {})}
        resp = await api.client.request(method, target, headers=headers, **kwargs)
        assert resp.status_code == 404, (method, target, resp.text)
        assert resp.json()["error"] == "not_found"

    listing = (await api.client.get("/v1/notes", headers=bob)).json()
    assert listing["items"] == []
    for params in ({"tag": "p"}, {"status": "trashed"}):
        assert (await api.client.get("/v1/notes", params=params, headers=bob)).json()["items"] == []
    assert await api.container.db.notes.find_one({}, fields) == before
    mine = (await api.client.get(url, headers=alice)).json()
    assert mine["content_md"] == "secret" and mine["status"] == "active"
