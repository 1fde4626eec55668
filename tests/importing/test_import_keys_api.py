"""POST /v1/notes/import with `external_ids`: one key per file makes each file an upsert
of the user's note with that key; bad keys fail the whole request before anything is
stored."""

from __future__ import annotations

from typing import Any

from tests.conftest import Api

DAY = b"---\ncreated: 2024-01-02T03:04:05.678Z\ntags: [log]\n---\n# Monday\n\nMilk.\n"


def form(*names: str, keys: list[Any] | None = None) -> dict[str, Any]:
    files = [("files", (name, DAY, "text/markdown")) for name in names]
    return {"files": files, "data": {"external_ids": keys} if keys is not None else None}


async def test_keyed_files_are_created_then_unchanged_then_updated(api: Api) -> None:
    h = await api.new_user()
    first = await api.client.post(
        "/v1/notes/import",
        **form("monday.md", "tuesday.md", keys=["d/mon.md", "d/tue.md"]),
        headers=h,
    )
    assert first.status_code == 200, first.text
    assert [i["outcome"] for i in first.json()["imported"]] == ["created", "created"]
    note = first.json()["imported"][0]["note"]
    assert note["external_id"] == "d/mon.md" and note["folder"] == "d"
    assert note["created_at"].startswith("2024-01-02T03:04:05.678")
    assert note["tags"] == ["log"]
    again = await api.client.post(
        "/v1/notes/import", **form("monday.md", keys=["d/mon.md"]), headers=h
    )
    assert again.json()["imported"][0]["outcome"] == "unchanged"
    same = again.json()["imported"][0]["note"]
    fields = ("id", "version", "updated_at", "created_at", "title", "tags")
    assert {k: same[k] for k in fields} == {k: note[k] for k in fields}
    edited = {
        "files": [("files", ("monday.md", DAY + b"Eggs.\n"))],
        "data": {"external_ids": ["d/mon.md"]},
    }
    changed = await api.client.post("/v1/notes/import", **edited, headers=h)
    item = changed.json()["imported"][0]
    assert item["outcome"] == "updated" and item["note"]["version"] == 2
    assert item["note"]["id"] == note["id"]
    # Without keys, every import makes new notes, as before.
    plain = await api.client.post("/v1/notes/import", **form("monday.md"), headers=h)
    assert plain.json()["imported"][0]["outcome"] == "created"
    assert plain.json()["imported"][0]["note"]["external_id"] is None
    assert await api.container.db.notes.count_documents({}) == 3


async def test_bad_keys_fail_the_request_before_anything_is_stored(api: Api) -> None:
    h = await api.new_user()
    cases: list[tuple[dict[str, Any], str]] = [
        (form("a.md", "b.md", keys=["a.md"]), "1 external_ids for 2 files"),
        (form("a.md", keys=["a.md", "b.md"]), "2 external_ids for 1 files"),
        (form("a.md", "b.md", keys=["same.md", "same.md"]), "sent twice"),
        (form("a.md", keys=["line\nbreak.md"]), "external_ids"),
        (form("a.md", keys=["x" * 1025]), "external_ids"),
        (form("a.md", keys=["   "]), "external_ids"),
        (
            {
                "files": [
                    ("files", ("a.md", DAY)),
                    ("external_ids", ("key.txt", b"a.md", "text/plain")),
                ]
            },
            "text fields",
        ),
    ]
    for kwargs, detail in cases:
        resp = await api.client.post("/v1/notes/import", **kwargs, headers=h)
        assert resp.status_code == 422, (detail, resp.text)
        assert detail in str(resp.json()["detail"]), resp.text
    assert await api.container.db.notes.count_documents({}) == 0


async def test_an_imported_key_is_the_importing_users_own(api: Api) -> None:
    alice, bob = await api.new_user("alice"), await api.new_user("bob")
    hers = await api.client.post("/v1/notes/import", **form("m.md", keys=["m.md"]), headers=alice)
    his = await api.client.post("/v1/notes/import", **form("m.md", keys=["m.md"]), headers=bob)
    assert his.json()["imported"][0]["outcome"] == "created"
    assert his.json()["imported"][0]["note"]["id"] != hers.json()["imported"][0]["note"]["id"]
