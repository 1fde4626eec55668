"""The local index follows commits: applies run in a worker thread, and removals made
meanwhile (a purge, a trash) are never undone by them."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from bson import ObjectId

from api.providers import embedding_model_key
from api.retrieval.local import sync
from api.retrieval.local.index import LocalIndex
from tests.conftest import running_app
from tests.helpers import wait_indexed


@pytest.mark.parametrize("prune_at", [sync.PRUNE_MIN_ENTRIES, 1], ids=["default", "prune-always"])
async def test_a_purge_while_the_new_version_is_applied_is_not_undone(
    make_settings: Any, monkeypatch: pytest.MonkeyPatch, prune_at: int
) -> None:
    """A big note's new version is applied in a worker thread: a purge meanwhile removes
    the note at once, and the thread's apply does not put it back (the poll cannot see a
    deleted document). Also with the ordering records pruned after every read and
    removal."""
    monkeypatch.setattr(sync, "_INLINE_APPLY_CHUNKS", 0)  # this small note is big enough
    monkeypatch.setattr(sync, "PRUNE_MIN_ENTRIES", prune_at)
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


async def test_the_ordering_records_do_not_grow_with_the_corpus(
    make_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records of applies and removals are pruned once no read under way can need
    them, rather than kept per note for the process's lifetime."""
    monkeypatch.setattr(sync, "PRUNE_MIN_ENTRIES", 4)
    async with running_app(make_settings()) as api:
        h = await api.new_user()
        ids = []
        for i in range(10):
            body = {"title": f"n{i}", "content_md": f"## A\n\nzymurgy {i}"}
            ids.append((await api.client.post("/v1/notes", json=body, headers=h)).json()["id"])
        for note_id in ids:
            await wait_indexed(api, h, note_id)
        container = api.container
        follower = sync.LocalIndexSync(
            container.db,
            LocalIndex(container.embedder.dimensions),
            model_key=embedding_model_key(container.embedder),
        )
        assert await follower.load_all() == 10
        assert follower.index.stats().notes == 10
        for note_id in ids[:6]:
            follower.remove(ObjectId(note_id))
        assert len(follower._apply_started) + len(follower._removed_at) < 4
        assert follower.index.stats().notes == 4
        note = await container.db.notes.find_one({"_id": ObjectId(ids[7])})
        await follower.refresh_note({**note, "indexed_at": None})  # re-applied
        assert follower.index.stats().notes == 4
        follower.index.close()
