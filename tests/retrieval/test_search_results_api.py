"""POST /v1/search results as notes change and candidates crowd: the re-check against
`notes`, edits waiting to be indexed, the per-user query cache, deeper rounds and section
scores."""

from __future__ import annotations

import asyncio
from typing import Any

from bson import ObjectId

from tests.conftest import Api, running_app
from tests.helpers import RecordingEmbedder
from tests.retrieval.api_helpers import note, search


async def test_recheck_walks_past_candidate_notes_the_database_no_longer_serves(
    api: Api,
) -> None:
    """Search re-checks the best candidate notes a window at a time (limit + 4). When the
    database says the best ones are gone (trashed behind the index's back, as between a
    write and the index refresh), the next windows are checked until `limit` notes pass,
    and a gone note is never returned."""
    from bson import ObjectId

    h = await api.new_user()
    made = []
    for i in range(12):
        words = "zebra migration " * (12 - i)  # the earlier notes match more strongly
        made.append(await note(api, h, f"Note {i}", f"## Section\n\n{words}plains {i}."))
    ids = [n["id"] for n in made]
    body = await search(api, h, "zebra migration", limit=12, mode="keyword")
    ranked = [r["note_id"] for r in body["results"]]
    assert sorted(ranked) == sorted(ids)
    # The local index still holds these chunks; only the database knows they are gone.
    gone, kept = ranked[:9], ranked[9:]
    await api.container.db.notes.update_many(
        {"_id": {"$in": [ObjectId(n) for n in gone]}}, {"$set": {"status": "trashed"}}
    )
    for limit, want in [(1, kept[:1]), (2, kept[:2]), (5, kept)]:
        body = await search(api, h, "zebra migration", limit=limit, mode="keyword")
        assert [r["note_id"] for r in body["results"]] == want


ROOMS = "The orchid meeting room booking policy requires approval from facilities. " * 25
ROOMS_NOTE = (
    "## Alpha\n\nShort alpha text about bluebird.\n\n## Rooms\n\n"
    + "\n\n".join(
        [ROOMS, ROOMS.replace("approval", "sign-off"), ROOMS.replace("facilities", "the office")]
    )
    + "\n"
)


async def test_an_edit_not_yet_indexed_never_moves_the_cited_text(make_settings: Any) -> None:
    """Between an edit and its re-index, search serves the indexed version's chunks, whose
    offsets index the OLD text: sections keep the text of the version they index (never
    the new text cut at old offsets), and say which version that is (`note_version`)."""
    from tests.migration.support import run_in_process

    settings = make_settings(autonote_index_workers=0)  # nothing re-indexes behind our back
    async with running_app(settings) as api:
        h = await api.new_user()
        created = await api.client.post(
            "/v1/notes", json={"title": "Rooms", "content_md": ROOMS_NOTE}, headers=h
        )
        note_id = created.json()["id"]
        code, _ = await run_in_process(settings)  # index version 1
        assert code == 0
        query = {"query": "orchid meeting room booking policy approval", "chunks_per_note": 3}

        async def sections() -> list[dict[str, Any]]:
            # The in-process index picks up the migration's commits by polling.
            for _ in range(200):
                r = await api.client.post("/v1/search", json=query, headers=h)
                assert r.status_code == 200, r.text
                if r.json()["results"]:
                    return r.json()["results"][0]["matching_chunks"]
                await asyncio.sleep(0.05)
            raise AssertionError("the indexed note never became searchable")

        before = await sections()
        assert any(len(s["chunk_ids"]) > 1 for s in before)  # a merged run of chunks
        assert all(ROOMS_NOTE[s["start_offset"] : s["end_offset"]] == s["content"] for s in before)
        edited = "## Preface\n\n" + "Filler about gardening tomatoes. " * 10 + "\n\n" + ROOMS_NOTE
        r = await api.client.patch(f"/v1/notes/{note_id}", json={"content_md": edited}, headers=h)
        assert r.status_code == 200 and r.json()["version"] == 2
        after = await sections()
        assert any("orchid" in s["content"] and len(s["chunk_ids"]) > 1 for s in after)
        for s in after:  # version 1's text only: nothing of the new preface
            assert s["note_version"] == 1
            assert "tomatoes" not in s["content"] and "Filler" not in s["content"]
        context = await api.client.post(
            "/v1/chat/context", json={"message": query["query"]}, headers=h
        )
        body = context.json()
        assert "tomatoes" not in body["context"], body["context"][:400]
        assert {c["note_version"] for c in body["citations"]} == {1}


async def test_one_users_queries_never_warm_another_users_search(api: Api) -> None:
    """Query vectors are cached per user: a cache hit is faster (`took_ms`), so a cache
    shared by all users told anyone which exact questions others had just asked."""
    alice, bob = await api.new_user("alice"), await api.new_user("bob")
    recorder = RecordingEmbedder(api.container.search.embedder)
    api.container.search.embedder = recorder
    question = "is the acquisition of globex by initech final"
    for who in (alice, alice, bob, bob):
        await search(api, who, question)
    assert recorder.texts == [question, question], "once per user, not once for all"
    r = await api.client.post("/v1/chat", json={"message": question}, headers=alice)
    assert r.status_code == 200, r.text
    assert recorder.calls == 2, "chat shares the asking user's own cache"


async def test_a_title_or_tag_edit_keeps_the_text_usable_for_citations(
    make_settings: Any,
) -> None:
    """Chunk offsets index the text they were cut from; a tag or title edit moves the
    version but not the text (`content_version`), so until the re-index sections are
    still cut from the note and sibling sections of one name stay apart."""
    notes = "## Notes\n\nAlpha widget calibration uses the blue knob first.\n\n"
    content = notes + notes.replace("Alpha", "Beta").replace("blue knob first", "red knob")
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        h = await api.new_user()
        r = await api.client.post(
            "/v1/notes", json={"title": "Widgets", "content_md": content}, headers=h
        )
        note_id = r.json()["id"]
        assert (await api.container.indexing.reconciler.run_once()) is not None
        q = {"query": "widget calibration knob", "chunks_per_note": 5}

        async def sections() -> list[dict[str, Any]]:
            return (await search(api, h, **q))["results"][0]["matching_chunks"]

        before = await sections()
        assert len(before) == 2
        for edit in ({"tags": ["b"]}, {"title": "Widget notes"}):
            r = await api.client.patch(f"/v1/notes/{note_id}", json=edit, headers=h)
            assert r.status_code == 200 and r.json()["indexed_version"] < r.json()["version"]
            after = await sections()
            assert [(s["start_offset"], s["end_offset"]) for s in after] == [
                (s["start_offset"], s["end_offset"]) for s in before
            ]
            assert all(content[s["start_offset"] : s["end_offset"]] == s["content"] for s in after)
        r = await api.client.patch(
            f"/v1/notes/{note_id}", json={"content_md": content + "\nMore.\n"}, headers=h
        )
        got = (await api.client.get(f"/v1/notes/{note_id}", headers=h)).json()
        assert got["version"] == 4
        doc = await api.container.db.notes.find_one({"_id": ObjectId(note_id)})
        assert doc["content_version"] == 4


async def test_filters_never_pass_a_note_that_no_longer_matches(make_settings: Any) -> None:
    """The index filters on tags and `updated_at` as of each note's last index run; a note
    whose tags changed since does not pass the old tag's filter before its re-index, in
    search or in chat's context."""
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        h = await api.new_user()
        r = await api.client.post(
            "/v1/notes",
            json={
                "title": "Plan",
                "content_md": "## Plan\n\nQuarterly roadmap review.",
                "tags": ["work"],
            },
            headers=h,
        )
        note_id = r.json()["id"]
        assert (await api.container.indexing.reconciler.run_once()) is not None
        work = {"query": "quarterly roadmap", "filters": {"tags": ["work"]}}
        assert [n["note_id"] for n in (await search(api, h, **work))["results"]] == [note_id]
        await api.client.patch(f"/v1/notes/{note_id}", json={"tags": ["home"]}, headers=h)
        assert (await search(api, h, **work))["results"] == []
        context = await api.client.post(
            "/v1/chat/context",
            json={"message": "quarterly roadmap", "filters": {"tags": ["work"]}},
            headers=h,
        )
        assert context.json()["citations"] == []
        assert (await api.container.indexing.reconciler.run_once()) is not None  # re-index
        home = {"query": "quarterly roadmap", "filters": {"tags": ["home"]}}
        assert [n["note_id"] for n in (await search(api, h, **home))["results"]] == [note_id]


async def test_a_note_with_many_matching_chunks_does_not_crowd_out_the_others(
    api: Api,
) -> None:
    """A note whose chunks all match can fill a retriever's list (60 chunks here): search
    fetches deeper while a list comes back full and short of notes, so `limit: 10`
    returns all 5 notes holding the word, in every mode."""
    h = await api.new_user()
    sections = "\n\n".join(
        f"## Rule {i}\n\nExample {i}: an example of an example, example after example."
        for i in range(300)
    )
    big = await note(api, h, "Spec", sections)
    assert big["chunk_count"] > 240  # fills the first deeper round (240) too
    filler = " ".join(f"word{i} lorem ipsum dolor" for i in range(90))
    small = [
        await note(api, h, f"Small {i}", f"{filler} one example here. {filler}") for i in range(4)
    ]
    backend = api.container.search.backend
    retrieve = backend.retrieve
    ks: list[int] = []

    async def counted(*args: Any, **kwargs: Any) -> Any:
        ks.append(kwargs["k"])
        return await retrieve(*args, **kwargs)

    backend.retrieve = counted
    try:
        for mode in ("keyword", "hybrid", "vector"):
            body = {"query": "example", "mode": mode, "limit": 10, "chunks_per_note": 1}
            r = await api.client.post("/v1/search", json=body, headers=h)
            assert r.status_code == 200, r.text
            ids = {n["note_id"] for n in r.json()["results"]}
            assert ids == {big["id"], *(n["id"] for n in small)}, (mode, r.json()["results"])
            # No deeper round once every note the filters allow is found (each search of a
            # user with fewer notes than `limit` paid every round up to 4 000 candidates).
            ks.clear()
            two = [big["id"], small[0]["id"]]
            body = {**body, "filters": {"note_ids": two}}
            r = await api.client.post("/v1/search", json=body, headers=h)
            assert {n["note_id"] for n in r.json()["results"]} == set(two), mode
            assert len(ks) <= 3, (mode, ks)  # rounds until the second note shows, no more
    finally:
        backend.retrieve = retrieve


async def test_the_section_holding_the_exact_match_comes_first(api: Api) -> None:
    """One table section of 20 chunks: a section scores as its best chunk, so a run of
    eight weak chunks does not outscore the single chunk holding the row asked for."""
    h = await api.new_user()
    rows = "\n".join(f"| row{i} | value {i} for the tamarin metric | {3 * i} |" for i in range(262))
    table = await note(api, h, "Metrics", f"## Table\n\n| name | desc | n |\n|---|---|---|\n{rows}")
    assert table["chunk_count"] > 10
    for row in (261, 130):
        r = await api.client.post(
            "/v1/search",
            json={"query": f"tamarin metric row{row}", "mode": "keyword", "chunks_per_note": 1},
            headers=h,
        )
        (section,) = r.json()["results"][0]["matching_chunks"]
        assert f"| row{row} |" in section["content"], (row, section["start_offset"])
