"""Search on the Atlas backend through the real app: isolation between users, every filter
in every mode, and catching up after creating, editing and trashing a note.

Each test works as users of its own, so the tests share the session's database and app.
Notes are written first, then every expectation waits for the index to catch up
(`expect_notes`, `eventually`); what must hold at any moment is checked on every response.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from tests.atlas_live.live import MODES, add_note, edit_note, eventually, expect_notes, search
from tests.conftest import Api
from tests.helpers import wait_indexed

# Setting up the session (building both indexes) may fall to any test of this module.
pytestmark = pytest.mark.timeout(900)

LIGHTHOUSE = (
    "## Night watch\n\nThe lighthouse keeper logs the lantern hours and the foghorn drills.\n\n"
    "## Supplies\n\nLamp oil, spare wicks and a logbook for the lantern room."
)


async def test_each_user_finds_only_their_own_notes(atlas_api: Api) -> None:
    """Two users with the same words, titles and tags: each finds exactly their own notes in
    every mode, and no filter (another user's note ids, a shared tag) widens that."""
    api = atlas_api
    users = {name: await api.new_user(name) for name in ("alice", "bob")}
    mine: dict[str, set[str]] = {name: set() for name in users}
    for name, headers in users.items():
        for i in range(2):
            note = await add_note(api, headers, f"Keeper log {i}", LIGHTHOUSE, ["shared"])
            mine[name].add(note["id"])
    query = "lighthouse lantern foghorn"
    for name, headers in users.items():
        await expect_notes(api, headers, query, mine[name])
    # Both users' notes are searchable now: cross-user filters meet an index that holds them.
    for name, other in (("alice", "bob"), ("bob", "alice")):
        headers = users[name]
        await expect_notes(api, headers, query, set(), filters={"note_ids": sorted(mine[other])})
        await expect_notes(api, headers, query, mine[name], filters={"tags": ["shared"]})
        both = sorted(mine[name] | mine[other])
        await expect_notes(api, headers, query, mine[name], filters={"note_ids": both})


async def test_every_filter_in_every_mode(atlas_api: Api) -> None:
    """`tags` (any of them; `[]` matches nothing), `note_ids` and `updated_after` (a note
    edited after the cut-off passes it), alone and combined, in hybrid, vector and keyword
    mode. Every note holds the query's words, so each mode must return exactly the notes
    passing the filter."""
    api = atlas_api
    h = await api.new_user("filters")
    text = "## Harbor\n\nHarbor crane inspection: check the hoist cables and the brake."
    a = await add_note(api, h, "Crane A", text, ["ops", "db"])
    b = await add_note(api, h, "Crane B", text, ["garden"])
    c = await add_note(api, h, "Crane C", text, [])
    # The cut-off: the latest `updated_at` of a, b and c as stored (`updated_after` is
    # strict, so all three are before it); everything written from here on is after it.
    cut = max((a, b, c), key=lambda note: datetime.fromisoformat(note["updated_at"]))
    cut_off = cut["updated_at"]
    d = await add_note(api, h, "Crane D", text + "\n\nAdded after the cut-off.", ["ops"])
    b = await edit_note(api, h, b["id"], content_md=text + "\n\nRe-inspected after the cut-off.")
    assert b["version"] == 2
    assert datetime.fromisoformat(b["updated_at"]) > datetime.fromisoformat(cut_off)
    ids = {key: note["id"] for key, note in zip("abcd", (a, b, c, d), strict=True)}

    query = "harbor crane inspection"
    await expect_notes(api, h, query, set(ids.values()))
    cases: list[tuple[dict[str, Any], str]] = [
        ({"tags": ["ops"]}, "ad"),
        ({"tags": ["db"]}, "a"),
        ({"tags": ["ops", "garden"]}, "abd"),
        ({"tags": ["nowhere"]}, ""),
        ({"tags": []}, ""),
        ({"note_ids": [ids["a"], ids["c"]]}, "ac"),
        ({"note_ids": []}, ""),
        ({"updated_after": cut_off}, "bd"),
        ({"updated_after": cut_off, "tags": ["garden"]}, "b"),
        ({"updated_after": cut_off, "tags": ["db"]}, ""),
        ({"updated_after": cut_off, "note_ids": [ids["a"], ids["d"]]}, "d"),
        ({"tags": ["ops"], "note_ids": [ids["a"], ids["b"], ids["c"]]}, "a"),
    ]
    for filters, keys in cases:
        await expect_notes(api, h, query, {ids[k] for k in keys}, filters=filters)
    # The edited note passes `updated_after` with its new version only.
    for mode in MODES:
        out = await search(api, h, query, mode=mode, filters={"updated_after": cut_off})
        (edited,) = [r for r in out["results"] if r["note_id"] == ids["b"]]
        assert {s["note_version"] for s in edited["matching_chunks"]} == {2}


async def test_search_catches_up_with_create_edit_and_trash(atlas_api: Api) -> None:
    """A new note is found once the index catches up; after an edit only the new version's
    text is returned (never the note twice, never mixed versions: checked on every
    response); after trashing, the note is gone while its neighbour is still found."""
    api = atlas_api
    h = await api.new_user("catch-up")
    old, new = "zephyr nectarine", "obsidian marmalade"
    neighbour = await add_note(
        api, h, "Pantry", f"## Shelf\n\nThe {old} jar sits next to the {new} jar."
    )
    probe = await add_note(api, h, "Probe", f"## Body\n\nA jar of {old} preserves.")
    both = {neighbour["id"], probe["id"]}
    await expect_notes(api, h, old, both)

    edited = await edit_note(
        api, h, probe["id"], content_md=f"## Body\n\nA jar of {new} preserves."
    )
    assert edited["version"] == 2
    seen: list[Any] = [None]

    async def only_new_text(query: str, mode: str) -> bool:
        out = await search(api, h, query, mode=mode)
        seen[0] = (query, mode, out["results"])
        found = {r["note_id"]: r for r in out["results"]}
        if neighbour["id"] not in found:
            return False
        result = found.get(probe["id"])
        if mode == "keyword" and query == old:  # its old words no longer match it
            return result is None
        if result is None:
            return False
        sections = result["matching_chunks"]
        return all(
            s["note_version"] == 2 and new in s["content"] and old not in s["content"]
            for s in sections
        )

    for query in (new, old):
        for mode in MODES:
            await eventually(lambda q=query, m=mode: only_new_text(q, m), what=lambda: str(seen[0]))

    r = await api.client.delete(f"/v1/notes/{probe['id']}", headers=h)
    assert r.status_code == 200, r.text
    await wait_indexed(api, h, probe["id"])

    async def trashed_is_gone(query: str, mode: str) -> bool:
        found = {r["note_id"] for r in (await search(api, h, query, mode=mode))["results"]}
        seen[0] = (query, mode, found)
        return neighbour["id"] in found and probe["id"] not in found

    for query in (new, old):
        for mode in MODES:
            await eventually(
                lambda q=query, m=mode: trashed_is_gone(q, m), what=lambda: str(seen[0])
            )
