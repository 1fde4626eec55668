"""POST /v1/notes/import with `key_by=filename`: each file's name is its key, and the file
an upsert of the user's note with that key; a name that is no valid key fails that file
alone, a bad `key_by` the whole request, before anything is stored."""

from __future__ import annotations

from typing import Any

from tests.conftest import Api

DAY = b"---\ncreated: 2024-01-02T03:04:05.678Z\ntags: [log]\n---\n# Monday\n\nMilk.\n"


def form(*names: str, keyed: bool = True, body: bytes = DAY) -> dict[str, Any]:
    files = [("files", (name, body, "text/markdown")) for name in names]
    return {"files": files, "data": {"key_by": "filename"} if keyed else None}


async def test_keyed_files_are_created_then_unchanged_then_updated(api: Api) -> None:
    h = await api.new_user()
    first = await api.client.post("/v1/notes/import", **form("d/mon.md", "d/tue.md"), headers=h)
    assert first.status_code == 200, first.text
    assert [i["outcome"] for i in first.json()["imported"]] == ["created", "created"]
    note = first.json()["imported"][0]["note"]
    assert note["external_id"] == "d/mon.md" and note["folder"] == "d"
    assert note["created_at"].startswith("2024-01-02T03:04:05.678")
    assert note["tags"] == ["log"] and note["title"] == "Monday"
    again = await api.client.post("/v1/notes/import", **form("d/mon.md"), headers=h)
    assert again.json()["imported"][0]["outcome"] == "unchanged"
    same = again.json()["imported"][0]["note"]
    fields = ("id", "version", "updated_at", "created_at", "title", "tags")
    assert {k: same[k] for k in fields} == {k: note[k] for k in fields}
    edited = form("d/mon.md", body=DAY + b"Eggs.\n")
    item = (await api.client.post("/v1/notes/import", **edited, headers=h)).json()["imported"][0]
    assert item["outcome"] == "updated" and item["note"]["version"] == 2
    assert item["note"]["id"] == note["id"]
    # Without key_by, every import makes new notes, as before.
    plain = await api.client.post("/v1/notes/import", **form("d/mon.md", keyed=False), headers=h)
    assert plain.json()["imported"][0]["outcome"] == "created"
    assert plain.json()["imported"][0]["note"]["external_id"] is None
    assert await api.container.db.notes.count_documents({}) == 3


async def test_a_name_that_is_no_key_fails_alone_and_a_bad_key_by_fails_all(api: Api) -> None:
    h = await api.new_user()
    names = ("ok.md", "line\u2028sep.md", "x" * 1022 + ".md")
    resp = await api.client.post("/v1/notes/import", **form(*names), headers=h)
    assert resp.status_code == 200, resp.text
    assert [i["filename"] for i in resp.json()["imported"]] == ["ok.md"]
    failed = resp.json()["errors"]
    assert [(e["filename"][:6], e["error"]) for e in failed] == [
        ("line\u2028s", "validation_error"),
        ("xxxxxx", "validation_error"),
    ]
    before = await api.container.db.notes.count_documents({})
    md = ("files", ("a.md", DAY))
    for kwargs in (
        {"files": [md], "data": {"key_by": "path"}},
        {"files": [md], "data": {"key_by": ["filename", "filename"]}},
        {"files": [md, ("key_by", ("k.txt", b"filename", "text/plain"))]},
        {"files": [md], "data": {"external_ids": ["a.md"]}},
    ):
        bad = await api.client.post("/v1/notes/import", **kwargs, headers=h)
        assert bad.status_code == 422, (kwargs, bad.text)
    assert await api.container.db.notes.count_documents({}) == before


async def test_an_imported_key_is_the_importing_users_own(api: Api) -> None:
    alice, bob = await api.new_user("alice"), await api.new_user("bob")
    hers = await api.client.post("/v1/notes/import", **form("m.md"), headers=alice)
    his = await api.client.post("/v1/notes/import", **form("m.md"), headers=bob)
    assert his.json()["imported"][0]["outcome"] == "created"
    assert his.json()["imported"][0]["note"]["id"] != hers.json()["imported"][0]["note"]["id"]
    again = await api.client.post("/v1/notes/import", **form("m.md"), headers=alice)
    assert again.json()["imported"][0]["outcome"] == "unchanged"
