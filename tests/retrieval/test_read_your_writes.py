"""A note that reads `indexed` is searchable by its author at once.

The note's status moves when its commit lands, and the in-process local index applies it
one database read later: a search waits for its author's commits under way in this
process. Every test sets the poll to an hour, so nothing else can make the note
searchable in time. (Commits of other processes arrive by the poll:
tests/retrieval/test_search_api.py::test_commits_by_another_worker_become_searchable.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from api.retrieval.local import sync
from tests.conftest import Api, running_app
from tests.helpers import wait_indexed

NOTE = {
    "title": "Vault",
    "content_md": "## Rotation\n\nThe zymurgy vault password rotates every 90 days.",
}
QUERY = {"query": "how often does the zymurgy vault password rotate?"}


async def _search_note_ids(api: Api, h: dict[str, str]) -> list[str]:
    r = await api.client.post("/v1/search", json=QUERY, headers=h)
    assert r.status_code == 200, r.text
    return [hit["note_id"] for hit in r.json()["results"]]


@asynccontextmanager
async def held_refreshes(api: Api, release: asyncio.Event) -> AsyncIterator[None]:
    """The in-process refresh after each commit waits for `release` (a loaded loop or a
    slow database, stretched)."""
    reconciler = api.container.indexing.reconciler
    refreshes = list(reconciler.listeners)

    async def held(note: dict[str, Any]) -> None:
        await release.wait()
        for refresh in refreshes:
            await refresh(note)

    reconciler.listeners = [held]
    try:
        yield
    finally:
        release.set()
        reconciler.listeners = refreshes


async def _later(release: asyncio.Event, delay_s: float) -> None:
    await asyncio.sleep(delay_s)
    release.set()


async def test_a_note_is_searchable_once_it_reads_indexed_while_its_refresh_is_slow(
    make_settings: Any,
) -> None:
    async with running_app(make_settings(autonote_search_poll_s=3600)) as api:
        h = await api.new_user()
        for step in ("create", "edit", "trash"):
            release = asyncio.Event()
            async with held_refreshes(api, release):
                if step == "create":
                    r = await api.client.post("/v1/notes", json=NOTE, headers=h)
                    note_id = r.json()["id"]
                elif step == "edit":
                    edited = {"content_md": NOTE["content_md"].replace("90", "30")}
                    r = await api.client.patch(f"/v1/notes/{note_id}", json=edited, headers=h)
                else:
                    r = await api.client.delete(f"/v1/notes/{note_id}", headers=h)
                assert r.status_code in (200, 201, 204), r.text
                note = await wait_indexed(api, h, note_id)
                releaser = asyncio.create_task(_later(release, 1.0))
                r = await api.client.post("/v1/search", json=QUERY, headers=h)
                await releaser
            results = r.json()["results"]
            if step == "trash":
                assert results == []
                continue
            [result] = results
            assert result["note_id"] == note_id
            assert [c["note_version"] for c in result["matching_chunks"]] == [note["version"]]
            days = "90 days" if step == "create" else "30 days"
            assert days in result["matching_chunks"][0]["content"]


async def test_a_search_waits_only_for_its_own_authors_commits(make_settings: Any) -> None:
    async with running_app(make_settings(autonote_search_poll_s=3600)) as api:
        writer, other = await api.new_user("writer"), await api.new_user("other")
        release = asyncio.Event()
        async with held_refreshes(api, release):
            note_id = (await api.client.post("/v1/notes", json=NOTE, headers=writer)).json()["id"]
            await wait_indexed(api, writer, note_id)  # committed; its refresh is held
            waiting = asyncio.create_task(_search_note_ids(api, writer))
            # Another user's search does not wait for the writer's commit (nor see it).
            assert await asyncio.wait_for(_search_note_ids(api, other), 30) == []
            await asyncio.sleep(0.2)
            assert not waiting.done()
            release.set()
            assert await asyncio.wait_for(waiting, 30) == [note_id]


async def test_a_search_waits_for_a_stuck_commit_only_so_long(
    make_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sync, "CATCH_UP_WAIT_S", 0.3)
    async with running_app(make_settings(autonote_search_poll_s=3600)) as api:
        h = await api.new_user()
        async with held_refreshes(api, asyncio.Event()):
            note_id = (await api.client.post("/v1/notes", json=NOTE, headers=h)).json()["id"]
            await wait_indexed(api, h, note_id)
            loop = asyncio.get_running_loop()
            started = loop.time()
            assert await asyncio.wait_for(_search_note_ids(api, h), 30) == []
            assert loop.time() - started >= 0.3  # it did wait, then served what it had
