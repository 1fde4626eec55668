"""POST /v1/search end to end: real server, chunker, local model, local hybrid index."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from api.indexing.runtime import build_indexing
from tests.conftest import Api, running_app
from tests.helpers import wait_indexed
from tests.retrieval.api_helpers import note, search

CODING_TIPS = """
## Python Best Practices

Always use type hints for better code quality.

## JavaScript Tips

Use const and let instead of var.

## Testing

Write unit tests for all functions.
"""


async def test_end_to_end_python_section_first(api: Api) -> None:
    h = await api.new_user()
    await note(api, h, "Coding Tips", CODING_TIPS)
    await note(api, h, "Groceries", "## Monday\n\nMilk, eggs, bread.\n\n## Friday\n\nFish.")
    body = await search(api, h, "How to write better Python code?", limit=3)
    assert body["backend"] == "local" and body["mode"] == "hybrid"
    top = body["results"][0]
    assert top["title"] == "Coding Tips"
    chunk = top["matching_chunks"][0]
    assert "Python" in " ".join(chunk["heading_path"])
    assert chunk["heading_path"] == ["Coding Tips", "Python Best Practices"]
    assert CODING_TIPS[chunk["start_offset"] : chunk["end_offset"]] == chunk["content"]


async def test_modes_and_filters(api: Api) -> None:
    h = await api.new_user()
    a = await note(api, h, "Postgres backups", "## Nightly\n\npg_dump runs at 02:00 UTC.", ["ops"])
    b = await note(api, h, "Sourdough", "## Starter\n\nFeed the starter flour and water.", ["food"])
    for mode in ("hybrid", "vector", "keyword"):
        body = await search(api, h, "pg_dump nightly", mode=mode)
        assert body["mode"] == mode and body["results"][0]["note_id"] == a["id"]
    assert (await search(api, h, "pg_dump", filters={"tags": ["food"]}, mode="keyword"))[
        "results"
    ] == []
    only_b = await search(api, h, "backup schedule", filters={"note_ids": [b["id"]]})
    assert {r["note_id"] for r in only_b["results"]} <= {b["id"]}
    later = await search(
        api, h, "starter", filters={"updated_after": datetime.now(UTC).isoformat()}
    )
    assert later["results"] == []
    assert (await search(api, h, "zzzzqqq unrelatedword", mode="keyword"))["results"] == []


async def test_users_never_see_each_others_notes(api: Api) -> None:
    alice = await api.new_user("alice")
    bob = await api.new_user("bob")
    secret = await note(
        api, alice, "Alice diary", "## Secret\n\nThe vault code is 4711.", ["shared-tag"]
    )
    await note(api, bob, "Bob notes", "## Misc\n\nNothing about vaults here.", ["shared-tag"])
    for body in (
        {"query": "vault code 4711"},
        {"query": "vault", "mode": "keyword"},
        {"query": "vault", "mode": "vector"},
        {"query": "vault", "filters": {"note_ids": [secret["id"]]}},
        {"query": "vault", "filters": {"tags": ["shared-tag"]}},
    ):
        r = await api.client.post("/v1/search", json=body, headers=bob)
        assert r.status_code == 200
        assert all(res["note_id"] != secret["id"] for res in r.json()["results"]), body
        assert "4711" not in r.text
    mine = await search(api, alice, "vault code 4711")
    assert mine["results"][0]["note_id"] == secret["id"]


async def test_trash_restore_and_purge_follow_in_search(api: Api) -> None:
    h = await api.new_user()
    n = await note(api, h, "Kyoto trip", "## Temples\n\nVisit Kinkaku-ji early in the morning.")
    url = f"/v1/notes/{n['id']}"
    assert (await search(api, h, "Kinkaku-ji"))["results"]
    await api.client.delete(url, headers=h)
    await wait_indexed(api, h, n["id"])
    assert (await search(api, h, "Kinkaku-ji"))["results"] == []
    await api.client.post(f"{url}/restore", headers=h)
    await wait_indexed(api, h, n["id"])
    assert (await search(api, h, "Kinkaku-ji"))["results"][0]["note_id"] == n["id"]
    await api.client.delete(url, params={"permanent": "true"}, headers=h)
    assert (await search(api, h, "Kinkaku-ji"))["results"] == []


async def test_results_only_from_one_current_version_during_reindex(api: Api) -> None:
    h = await api.new_user()
    versions = {1: "## Status\n\nThe deploy marker is ALPHA one."}
    n = await note(api, h, "Deploys", versions[1])
    url = f"/v1/notes/{n['id']}"
    stop = asyncio.Event()
    seen_versions: list[int] = []

    async def reader() -> None:
        while not stop.is_set():
            body = await search(api, h, "deploy marker", mode="keyword")
            assert body["results"], "the note never disappears while it is re-indexed"
            for section in body["results"][0]["matching_chunks"]:
                owners = [
                    v
                    for v, text in versions.items()
                    if text[section["start_offset"] : section["end_offset"]] == section["content"]
                ]
                assert owners, "every section is the exact text of some version"
                seen_versions.append(max(owners))

    task = asyncio.create_task(reader())
    for v in range(2, 12):
        versions[v] = f"## Status\n\nThe deploy marker is version {v} now.\n\n## Extra {v}\n\nmore"
        await api.client.patch(url, json={"content_md": versions[v]}, headers=h)
        await asyncio.sleep(0.05)
    await wait_indexed(api, h, n["id"])
    await asyncio.sleep(0.2)
    stop.set()
    await task
    final = await search(api, h, "deploy marker", mode="keyword")
    assert "version 11" in final["results"][0]["matching_chunks"][0]["content"]
    assert len(seen_versions) > 5


async def test_commits_by_another_worker_become_searchable(make_settings: Any) -> None:
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        h = await api.new_user()
        r = await api.client.post(
            "/v1/notes",
            json={
                "title": "Garden",
                "content_md": "## Tomatoes\n\nWater the tomatoes every evening.",
            },
            headers=h,
        )
        c = api.container
        # A reconciler that does not share this process's search index: like `autonote worker`.
        other = build_indexing(
            c.settings, c.db, chunker=c.chunker, embedder=c.embedder, concurrency=1
        )
        assert (await other.reconciler.run_once()) is not None
        for _ in range(60):
            body = (
                await api.client.post("/v1/search", json={"query": "tomatoes evening"}, headers=h)
            ).json()
            if body["results"]:
                break
            await asyncio.sleep(0.1)
        assert body["results"][0]["note_id"] == r.json()["id"]


async def test_chunking_disabled_falls_back_to_note_level(make_settings: Any) -> None:
    async with running_app(make_settings(chunking_enabled=False)) as api:
        h = await api.new_user()
        await api.client.post(
            "/v1/notes",
            json={"title": "Bread", "content_md": "Knead the dough for ten minutes."},
            headers=h,
        )
        await api.client.post(
            "/v1/notes", json={"title": "Cars", "content_md": "Oil change."}, headers=h
        )
        body = await search(api, h, "dough knead")
        assert body["mode"] == "note_level" and len(body["results"]) == 1
        assert body["results"][0]["title"] == "Bread"
        # Said, whatever mode was asked for, and passed on by chat.
        assert "CHUNKING_ENABLED=false" in body["warning"]
        vector = await search(api, h, "dough knead", mode="vector")
        assert vector["mode"] == "note_level" and "CHUNKING_ENABLED=false" in vector["warning"]
        chat = await api.client.post("/v1/chat", json={"message": "knead?"}, headers=h)
        assert "CHUNKING_ENABLED=false" in chat.json()["warning"]


async def test_bad_search_requests(api: Api) -> None:
    h = await api.new_user()
    for body in (
        {"query": ""},
        {"query": "   "},
        {"query": "x", "limit": 0},
        {"query": "x", "limit": 51},
        {"query": "x", "mode": "fuzzy"},
        {"query": "x", "filters": {"note_ids": ["nope"]}},
        {"query": "x", "unknown": 1},
        {"query": "x" * 2001},
        # The schema says date-time string; pydantic alone would take a number as Unix time.
        {"query": "x", "filters": {"updated_after": -61267423}},
        {"query": "x", "filters": {"updated_after": 1.5}},
        {"query": "x", "filters": {"updated_after": True}},
        {"query": "x", "filters": {"updated_after": "yesterday"}},
        # pydantic alone reads a numeric string as Unix time (schemathesis, 600 examples)
        # and a bare date or an offset-less time as naive; the format needs an offset.
        {"query": "x", "filters": {"updated_after": "6"}},
        {"query": "x", "filters": {"updated_after": "2026-01-31"}},
        {"query": "x", "filters": {"updated_after": "2026-01-31T00:00:00"}},
        {"query": "x", "filters": {"updated_after": "2026-13-31T00:00:00Z"}},
        # Integers are JSON integers: pydantic alone reads "5" and true as 5 and 1.
        {"query": "x", "limit": "5"},
        {"query": "x", "limit": True},
        {"query": "x", "limit": 2.5},
        {"query": "x", "chunks_per_note": "2"},
        {"query": "x", "chunks_per_note": False},
    ):
        r = await api.client.post("/v1/search", json=body, headers=h)
        assert r.status_code == 422, body
        assert r.json()["error"] == "validation_error"
    r = await api.client.post(
        "/v1/search", json={"query": "x", "filters": {"updated_after": 0}}, headers=h
    )
    assert "ISO 8601 date-time string" in str(r.json()["detail"])
    r = await api.client.post("/v1/search", json={"query": "x", "limit": "5"}, headers=h)
    assert "expected a JSON integer" in str(r.json()["detail"])
    whole = {"query": "x", "limit": 5.0, "chunks_per_note": 2}  # 5.0 is an integer in JSON
    assert (await api.client.post("/v1/search", json=whole, headers=h)).status_code == 200
    for instant in (
        "2026-01-31T00:00:00Z",
        "2026-01-31t00:00:00.5+01:00",
        "2026-01-31T00:00:00-05:30",
    ):
        ok = {"query": "x", "filters": {"updated_after": instant}}
        assert (await api.client.post("/v1/search", json=ok, headers=h)).status_code == 200
    assert (await api.client.post("/v1/search", json={"query": "x"})).status_code == 401


# Tags the database cannot hold or no note can have (a lone surrogate among them), on the
# chunk and the note-level paths.
EDGE_FILTERS: tuple[dict[str, Any], ...] = (
    {"tags": ["\ud800"]},
    {"tags": [""]},
    {"tags": ["   "]},
    {"tags": ["a\u0000b"]},
)


@pytest.mark.parametrize("chunking", [True, False], ids=["chunks", "note_level"])
async def test_filter_edge_values_with_indexed_notes(make_settings: Any, chunking: bool) -> None:
    async with running_app(make_settings(chunking_enabled=chunking)) as api:
        h = await api.new_user()
        r = await api.client.post(
            "/v1/notes",
            json={"title": "Backups", "content_md": "Restore the backup nightly.", "tags": ["ops"]},
            headers=h,
        )
        if chunking:
            await wait_indexed(api, h, r.json()["id"])
        modes = ("hybrid", "vector", "keyword") if chunking else ("hybrid",)
        as_json = {**h, "content-type": "application/json"}  # raw: "\ud800" stays escaped
        for filters in EDGE_FILTERS:
            for mode in modes:
                body = json.dumps({"query": "backup", "mode": mode, "filters": filters})
                r = await api.client.post("/v1/search", content=body, headers=as_json)
                assert r.status_code == 422, (filters, mode, r.text)
                assert r.json()["error"] == "validation_error"
            for path in ("/v1/chat/context", "/v1/chat"):
                body = json.dumps({"message": "backup?", "filters": filters})
                r = await api.client.post(path, content=body, headers=as_json)
                assert r.status_code == 422, (path, filters, r.text)
        # Tags are compared as stored (trimmed). Instants an offset moves outside years
        # 1-9999 in UTC are before / after every note, in the filter index and on the
        # note-level path.
        for instant, hits in (
            ("0001-01-01T00:00:00Z", ["Backups"]),
            ("0001-01-01T00:00:00+00:01", ["Backups"]),
            ("9999-12-31T23:59:59-23:59", []),
        ):
            for mode in modes:
                ok = {"tags": ["  ops "], "updated_after": instant}
                found = await search(api, h, "backup", mode=mode, filters=ok)
                assert [n["title"] for n in found["results"]] == hits, (instant, mode)
            for path in ("/v1/chat/context", "/v1/chat"):
                body = {"message": "backup?", "filters": {"updated_after": instant}}
                assert (await api.client.post(path, json=body, headers=h)).status_code == 200


async def test_embedding_outage_degrades_hybrid_to_keyword(
    make_settings: Any, openai_stub: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(
        embedding_provider="openai",
        openai_api_key="sk-test",
        openai_base_url=openai_stub.base_url,
        openai_max_retries=1,
        chat_model="gpt-test",
        # What is checked is the warning chat carries; relevance on keyword evidence alone
        # would have it abstain on this one-line note.
        chat_min_relevance=0.0,
    )
    async with running_app(settings) as api:
        h = await api.new_user()
        n = await note(api, h, "Backups", "## Nightly\n\npg_dump runs at 02:00 UTC.")
        openai_stub.fail_next(500, count=1000, path="/v1/embeddings")
        index_type = type(api.container.search.backend.index)
        ranked: list[str | None] = []
        original = index_type.search_hybrid

        def counting(self: Any, author: str, vector: Any, query: str | None, **kw: Any) -> Any:
            ranked.append(query)
            return original(self, author, vector, query, **kw)

        monkeypatch.setattr(index_type, "search_hybrid", counting)
        body = await search(api, h, "pg_dump schedule")
        assert body["mode"] == "keyword" and "keyword results only" in body["warning"]
        assert body["results"][0]["note_id"] == n["id"]
        # One pass: the keyword list ranked while the embedding failed is the one used.
        assert ranked == ["pg_dump schedule"]
        monkeypatch.undo()
        r = await api.client.post(
            "/v1/search", json={"query": "pg_dump", "mode": "vector"}, headers=h
        )
        assert r.status_code == 503 and r.json()["error"] == "embedding_unavailable"
        assert "retry-after" in r.headers
        # Chat says so too: its retrieval lost the vectors, so its answer carries the
        # warning.
        ask = {"message": "when does pg_dump run?"}
        chat = await api.client.post("/v1/chat", json=ask, headers=h)
        assert chat.status_code == 200 and chat.json()["citations"]
        assert chat.json()["mode"] == "llm" and "keyword results only" in chat.json()["warning"]
        context = await api.client.post("/v1/chat/context", json=ask, headers=h)
        assert "keyword results only" in context.json()["warning"]
        async with api.client.stream(
            "POST", "/v1/chat", json={**ask, "stream": True}, headers=h
        ) as streamed:
            text = "".join([chunk async for chunk in streamed.aiter_text()])
        done = json.loads(text.split("event: done")[1].split("data: ", 1)[1].split("\n")[0])
        assert "keyword results only" in done["warning"]
        openai_stub.fail_next(500, count=1000, path="/v1/chat/completions")
        both = (await api.client.post("/v1/chat", json=ask, headers=h)).json()
        assert both["mode"] == "extractive"
        assert "keyword results only" in both["warning"] and "chat model" in both["warning"]
        openai_stub.reset()
        healthy = (await api.client.post("/v1/chat", json=ask, headers=h)).json()
        assert healthy["mode"] == "llm" and healthy["warning"] is None
        assert (await search(api, h, "pg_dump schedule"))["mode"] == "hybrid"
