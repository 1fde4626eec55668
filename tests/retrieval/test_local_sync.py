"""The local index follows commits: applies run in a worker thread, and removals made
meanwhile (a purge, a trash) are never undone by them."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from api.retrieval import sync
from tests.conftest import running_app
from tests.helpers import wait_indexed


async def test_a_purge_while_the_new_version_is_applied_is_not_undone(
    make_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new version's chunks are applied in a worker thread (0.8-1.9 s for a 2 MB note):
    a purge meanwhile removed the note at once, then the thread put it back, and nothing
    removed it again (the poll cannot see a deleted document; found by review)."""
    monkeypatch.setattr(sync, "_INLINE_APPLY_CHUNKS", 0)  # this small note is big enough
    async with running_app(make_settings()) as api:
        h = await api.new_user()
        body = {"title": "t", "content_md": "## A\n\nzymurgy one"}
        note_id = (await api.client.post("/v1/notes", json=body, headers=h)).json()["id"]
        await wait_indexed(api, h, note_id)
        index = api.container.search.backend.index
        entered, release = threading.Event(), threading.Event()
        replace = index.replace_notes

        def slow_replace(items: Any) -> Any:  # stands for the records of a big note
            entered.set()
            release.wait(30)
            return replace(items)

        index.replace_notes = slow_replace
        r = await api.client.patch(
            f"/v1/notes/{note_id}", json={"content_md": "## A\n\nzymurgy two"}, headers=h
        )
        assert r.status_code == 200, r.text
        assert await asyncio.to_thread(entered.wait, 30)
        r = await api.client.delete(f"/v1/notes/{note_id}", params={"permanent": "true"}, headers=h)
        assert r.status_code == 204
        assert index.note_version(note_id) is None
        release.set()
        await asyncio.sleep(1.0)  # the thread finishes, then its check runs on the loop
        index.replace_notes = replace
        assert index.note_version(note_id) is None, "the purged note is back in the index"
