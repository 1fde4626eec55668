"""The reconciler against the real embedded server, the real chunker and the real local
embedding model: incremental embeddings, restore/revert reuse, convergence under concurrent
edits, the swap, sync/disabled modes, tags, re-chunking when the chunker changes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from bson import ObjectId

from api.chunking import get_chunker
from api.indexing import worker
from tests.conftest import Api, running_app
from tests.helpers import (
    GatedEmbedder,
    RecordingEmbedder,
    lease_lost_after_its_check,
    paragraph,
    sectioned_note,
    wait_evicted,
    wait_indexed,
)


async def create(
    api: Api,
    h: dict[str, str],
    content: str,
    title: str = "Big note",
    tags: list[str] | None = None,
) -> dict[str, Any]:
    r = await api.client.post(
        "/v1/notes", json={"title": title, "content_md": content, "tags": tags or []}, headers=h
    )
    assert r.status_code == 201, r.text
    return r.json()


def spy(api: Api) -> RecordingEmbedder:
    recorder = RecordingEmbedder(api.container.embedder)
    api.container.indexing.reconciler.embedder = recorder
    return recorder


async def stored_chunks(api: Api, note_id: str) -> list[dict[str, Any]]:
    """The note's chunk documents once old versions are evicted (eviction follows the flip
    of `indexed_version` by a few milliseconds; readers filter by version meanwhile), and
    once an older generation's chunks are gone (a new chunker or model: they serve the
    note's user until the user's switch, a second or so after the last re-index)."""

    oid = ObjectId(note_id)
    for _ in range(200):
        note = await api.container.db.notes.find_one({"_id": oid})
        docs = (
            await api.container.db.note_chunks.find({"note_id": oid})
            .sort([("note_version", 1), ("chunk_index", 1)])
            .to_list()
        )
        if all(
            (d["note_version"], d.get("generation"))
            == (note.get("indexed_version"), note.get("generation"))
            for d in docs
        ):
            return docs
        await asyncio.sleep(0.025)
    raise AssertionError("old chunk versions were never evicted")


def expected(api: Api, content: str, title: str) -> list[Any]:
    return api.container.chunker.chunk_note(content, title)


async def test_one_paragraph_edit_reembeds_only_that_chunk(api: Api) -> None:
    h = await api.new_user()
    content = sectioned_note(40, seed=1)
    note = await create(api, h, content)
    first = await wait_indexed(api, h, note["id"])
    n = first["chunk_count"]
    assert n >= 40 and first["last_index_stats"]["embedded"] == n
    recorder = spy(api)

    sections = content.split("## Section 17\n\n")
    tail = sections[1].split("\n", 1)
    edited = (
        sections[0]
        + "## Section 17\n\nA completely rewritten paragraph about sourdough.\n"
        + tail[1]
    )
    r = await api.client.patch(f"/v1/notes/{note['id']}", json={"content_md": edited}, headers=h)
    assert r.json()["version"] == 2
    after = await wait_indexed(api, h, note["id"])
    stats = after["last_index_stats"]
    new_chunks = expected(api, edited, "Big note")
    old_hashes = {c.content_hash for c in expected(api, content, "Big note")}
    changed = [c for c in new_chunks if c.content_hash not in old_hashes]
    assert len(changed) == 1 and "sourdough" in changed[0].content_md
    assert stats["embedded"] == 1 and stats["reused"] == n - 1
    assert recorder.texts == [changed[0].embedding_text]
    assert stats["tokens_embedded"] == api.container.embedder.tokenizer.count(
        changed[0].embedding_text
    )
    docs = await stored_chunks(api, note["id"])
    assert {d["note_version"] for d in docs} == {2}, "old version evicted after the swap"
    assert [d["content_hash"] for d in docs] == [c.content_hash for c in new_chunks]
    cached = await api.container.db.embedding_cache.find({}, {"content_hash": 1}).to_list()
    assert [c["content_hash"] for c in cached] == [
        h for h in old_hashes if h not in {c.content_hash for c in new_chunks}
    ], "only the vector that left note_chunks is cached, not the live ones"


async def test_restore_and_revert_cost_no_embeddings(api: Api) -> None:
    h = await api.new_user()
    v1 = sectioned_note(8, seed=2)
    note = await create(api, h, v1)
    await wait_indexed(api, h, note["id"])
    url = f"/v1/notes/{note['id']}"
    v2 = v1 + "\n## Extra\n\nSomething new to embed.\n"
    await api.client.patch(url, json={"content_md": v2}, headers=h)
    assert (await wait_indexed(api, h, note["id"]))["last_index_stats"]["embedded"] == 1
    recorder = spy(api)

    await api.client.patch(url, json={"content_md": v1}, headers=h)  # undo the edit
    reverted = await wait_indexed(api, h, note["id"])
    assert reverted["version"] == 3 and reverted["last_index_stats"]["embedded"] == 0

    await api.client.delete(url, headers=h)
    trashed = await wait_indexed(api, h, note["id"])
    assert trashed["chunk_count"] == 0 and await stored_chunks(api, note["id"]) == []
    await api.client.post(f"{url}/restore", headers=h)
    restored = await wait_indexed(api, h, note["id"])
    assert restored["chunk_count"] == len(expected(api, v1, "Big note"))
    assert restored["last_index_stats"]["embedded"] == 0
    assert recorder.texts == [] and recorder.calls == 0


async def test_no_user_reuses_another_users_vectors(api: Api) -> None:
    """Vectors are reused across an author's own notes and versions only. A cache shared
    by all users was an oracle: Bob could confirm a guess of Alice's text, even text she
    had edited away or trashed, from `last_index_stats` (reused 1 vs embedded 1)."""
    alice, bob = await api.new_user("alice"), await api.new_user("bob")
    secret = "## Names\n\nBob Smith and Carol Jones are on the list."
    note = await create(api, alice, secret, title="Layoffs")
    await wait_indexed(api, alice, note["id"])
    url = f"/v1/notes/{note['id']}"
    await api.client.patch(url, json={"content_md": "## Names\n\n(redacted)"}, headers=alice)
    await wait_indexed(api, alice, note["id"])
    db = api.container.db
    await wait_evicted(db, ObjectId(note["id"]))
    owner = (await db.notes.find_one({"_id": ObjectId(note["id"])}))["author_id"]
    cached = await db.embedding_cache.find({}, {"author_id": 1}).to_list()
    assert cached and {c["author_id"] for c in cached} == {owner}

    recorder = spy(api)
    guess = await create(api, bob, secret, title="Layoffs")  # Bob's correct guess
    stats = (await wait_indexed(api, bob, guess["id"]))["last_index_stats"]
    assert (stats["embedded"], stats["reused"]) == (1, 0)
    assert len(recorder.texts) == 1

    # Alice's own copy of the evicted text still costs her nothing.
    again = await create(api, alice, secret, title="Layoffs")
    assert (await wait_indexed(api, alice, again["id"]))["last_index_stats"]["embedded"] == 0


async def purged_while_it_embeds(
    api: Api, h: dict[str, str], gate: GatedEmbedder
) -> dict[str, Any]:
    """Create a note, purge it while its run waits in `gate`, then let the run go on."""
    note = await create(api, h, sectioned_note(6, seed=5))
    await asyncio.wait_for(gate.entered.wait(), 30)
    r = await api.client.delete(f"/v1/notes/{note['id']}", params={"permanent": "true"}, headers=h)
    assert r.status_code == 204
    gate.release.set()
    return note


async def test_a_note_purged_while_it_is_indexed_leaves_no_chunks(api: Api) -> None:
    """The purge deletes the note's chunks at once, but a run already embedding it then
    wrote its own and lost its lease: the deleted text stayed in note_chunks until the
    orphan sweep (every 10 minutes). That run now removes them."""
    h = await api.new_user()
    reconciler = api.container.indexing.reconciler
    gate = GatedEmbedder(reconciler.embedder)
    reconciler.embedder = gate
    written = asyncio.Event()
    insert_version = reconciler.chunks.insert_version

    async def insert_and_tell(*args: Any, **kwargs: Any) -> Any:
        result = await insert_version(*args, **kwargs)
        written.set()
        return result

    reconciler.chunks.insert_version = insert_and_tell
    lease_lost_after_its_check(reconciler)  # the purge lands after the run's lease check
    note = await purged_while_it_embeds(api, h, gate)
    await asyncio.wait_for(written.wait(), 30)
    chunks = api.container.db.note_chunks
    for _ in range(100):
        if await chunks.count_documents({"note_id": ObjectId(note["id"])}) == 0:
            break
        await asyncio.sleep(0.05)
    assert await chunks.count_documents({"note_id": ObjectId(note["id"])}) == 0


async def test_a_run_whose_note_was_purged_before_its_write_writes_nothing(api: Api) -> None:
    """The purge lands while the run embeds: its lease check before the write finds no
    note, so it writes no chunk of the deleted text at all."""
    h = await api.new_user()
    reconciler = api.container.indexing.reconciler
    gate = GatedEmbedder(reconciler.embedder)
    reconciler.embedder = gate
    inserts: list[int] = []
    checked = asyncio.Event()
    insert_version, may_replace = reconciler.chunks.insert_version, reconciler._may_replace

    async def counted_insert(*args: Any, **kwargs: Any) -> Any:
        inserts.append(1)
        return await insert_version(*args, **kwargs)

    async def told_check(*args: Any, **kwargs: Any) -> bool:
        allowed = await may_replace(*args, **kwargs)
        checked.set()
        return allowed

    reconciler.chunks.insert_version = counted_insert  # type: ignore[method-assign]
    reconciler._may_replace = told_check  # type: ignore[method-assign]
    await purged_while_it_embeds(api, h, gate)
    await asyncio.wait_for(checked.wait(), 30)
    await asyncio.sleep(0.2)
    assert inserts == []
    assert await api.container.db.note_chunks.count_documents({}) == 0


def slow_first_cache_write(api: Api) -> tuple[asyncio.Event, asyncio.Event]:
    """Make the next embedding-cache write (a run moving vectors out of `note_chunks`)
    take a second: (entered, finished) events."""
    cache = api.container.indexing.reconciler.cache
    real = cache.put_many
    entered, finished = asyncio.Event(), asyncio.Event()

    async def slow(*args: Any) -> None:
        first = not entered.is_set()
        entered.set()
        if first:
            await asyncio.sleep(1.0)
        await real(*args)
        if first:
            finished.set()

    cache.put_many = slow  # type: ignore[method-assign]
    return entered, finished


async def test_a_late_eviction_never_deletes_the_next_versions_chunks(api: Api) -> None:
    """Run A commits v2 (releasing the lease) and evicts v1; meanwhile the note is edited
    and run B indexes v3. A's eviction deletes older versions only, never v3's (else the
    note says indexed, with no chunks)."""
    h = await api.new_user()
    note = await create(api, h, sectioned_note(3, seed=1))
    await wait_indexed(api, h, note["id"])
    entered, finished = slow_first_cache_write(api)
    url = f"/v1/notes/{note['id']}"
    await api.client.patch(url, json={"content_md": sectioned_note(3, seed=2)}, headers=h)
    await asyncio.wait_for(entered.wait(), 30)  # A committed v2 and is evicting v1
    await api.client.patch(url, json={"content_md": sectioned_note(3, seed=3)}, headers=h)
    after = await wait_indexed(api, h, note["id"])
    await asyncio.wait_for(finished.wait(), 30)
    await wait_evicted(api.container.db, ObjectId(note["id"]))
    assert after["indexed_version"] == 3
    docs = await stored_chunks(api, note["id"])
    assert len(docs) == after["chunk_count"] == 3 and {d["note_version"] for d in docs} == {3}


async def test_a_late_removal_never_deletes_a_restored_notes_chunks(api: Api) -> None:
    """Run A removes a trashed note's chunks; meanwhile the note is restored and run B
    writes them back. A, deleting after its commit, once deleted every chunk of the note,
    B's too (A now deletes before it commits, and only the chunks it read)."""
    h = await api.new_user()
    note = await create(api, h, sectioned_note(3, seed=1))
    await wait_indexed(api, h, note["id"])
    entered, finished = slow_first_cache_write(api)
    url = f"/v1/notes/{note['id']}"
    await api.client.delete(url, headers=h)
    await asyncio.wait_for(entered.wait(), 30)  # A is removing the chunks, caching vectors
    assert (await api.client.post(f"{url}/restore", headers=h)).status_code == 200
    await asyncio.wait_for(finished.wait(), 30)
    after = await wait_indexed(api, h, note["id"])
    await asyncio.sleep(0.2)  # A's delete follows its cache write at once
    assert after["status"] == "active" and after["chunk_count"] == 3
    docs = await stored_chunks(api, note["id"])
    assert len(docs) == 3 and {d["note_version"] for d in docs} == {after["indexed_version"]}


async def test_fifty_concurrent_edits_converge_to_the_final_content(api: Api) -> None:
    h = await api.new_user()
    note = await create(api, h, sectioned_note(5, seed=3))
    url = f"/v1/notes/{note['id']}"
    edits = [sectioned_note(5, seed=100 + i) for i in range(50)]
    results = await asyncio.gather(
        *[api.client.patch(url, json={"content_md": body}, headers=h) for body in edits]
    )
    assert all(r.status_code == 200 for r in results)
    final = await wait_indexed(api, h, note["id"], timeout_s=120)
    assert final["version"] == 51 and final["indexed_version"] == 51
    want = expected(api, final["content_md"], "Big note")
    docs = await stored_chunks(api, note["id"])
    assert [(d["note_version"], d["chunk_index"]) for d in docs] == [
        (51, i) for i in range(len(want))
    ], "no duplicates, no stale version"
    assert [d["content_md"] for d in docs] == [c.content_md for c in want]
    assert [(d["start_offset"], d["end_offset"]) for d in docs] == [
        (c.start_offset, c.end_offset) for c in want
    ]


async def test_chunk_listing_matches_the_chunker(api: Api) -> None:
    h = await api.new_user()
    content = "Intro text.\n\n## Setup\n\nInstall it.\n\n### Linux\n\n```sh\napt install x\n```\n"
    note = await create(api, h, content, title="Guide")
    await wait_indexed(api, h, note["id"])
    body = (await api.client.get(f"/v1/notes/{note['id']}/chunks", headers=h)).json()
    want = expected(api, content, "Guide")
    assert body["indexed_version"] == 1 and len(body["items"]) == len(want)
    for item, chunk in zip(body["items"], want, strict=True):
        assert item["heading_path"] == chunk.heading_path
        assert item["content_md"] == content[item["start_offset"] : item["end_offset"]]
        assert "embedding" not in item
    assert body["items"][-1]["heading_path"] == ["Guide", "Setup", "Linux"]


async def test_tag_change_updates_chunks_without_embedding(api: Api) -> None:
    h = await api.new_user()
    note = await create(api, h, sectioned_note(3, seed=4), tags=["a"])
    await wait_indexed(api, h, note["id"])
    recorder = spy(api)
    r = await api.client.patch(f"/v1/notes/{note['id']}", json={"tags": ["b", "c"]}, headers=h)
    assert r.json()["version"] == 2  # the ETag If-Match checks moves with the tags
    after = await wait_indexed(api, h, note["id"])
    assert after["indexed_version"] == 2 and after["last_index_stats"]["embedded"] == 0
    docs = await stored_chunks(api, note["id"])
    assert docs and all(d["tags"] == ["b", "c"] and d["note_version"] == 2 for d in docs)
    assert recorder.calls == 0


async def test_sync_mode_indexes_before_the_write_returns(make_settings: Any) -> None:
    async with running_app(make_settings(chunking_async=False)) as api:
        h = await api.new_user()
        note = await create(api, h, sectioned_note(4, seed=5))
        assert note["index_status"] == "indexed" and note["indexed_version"] == 1
        assert note["chunk_count"] == len(await stored_chunks(api, note["id"])) > 0
        r = await api.client.patch(
            f"/v1/notes/{note['id']}", json={"content_md": "## New\n\nx"}, headers=h
        )
        assert r.json()["indexed_version"] == 2 and r.json()["chunk_count"] == 1


async def test_sync_mode_returns_at_its_timeout_and_the_run_finishes_after(
    make_settings: Any,
) -> None:
    """AUTONOTE_SYNC_INDEX_TIMEOUT_S bounds the write, not only the time between runs: the
    write answers at the timeout, pending; its run goes on and the note ends indexed,
    embedded once (the run is not stopped at the timeout, which would embed it twice)."""
    settings = make_settings(chunking_async=False, autonote_sync_index_timeout_s=0.5)
    async with running_app(settings) as api:
        h = await api.new_user()
        asked: list[str] = []  # every text asked for, also by a call that never returns

        class AskedEmbedder(GatedEmbedder):
            async def embed(self, texts: list[str], **kwargs: Any) -> Any:
                asked.extend(texts)
                return await super().embed(texts, **kwargs)

        gated = AskedEmbedder(api.container.embedder)
        api.container.indexing.reconciler.embedder = gated
        loop = asyncio.get_running_loop()
        started = loop.time()
        # Not held until the embedder is released (it waited forever).
        note = await asyncio.wait_for(create(api, h, sectioned_note(3, seed=7)), 10)
        assert loop.time() - started < 5
        assert note["index_status"] in ("pending", "indexing") and note["indexed_version"] is None
        await asyncio.wait_for(gated.entered.wait(), 30)
        gated.release.set()
        done = await wait_indexed(api, h, note["id"])
        assert done["indexed_version"] == 1 and done["chunk_count"] > 0
        assert len(asked) == len(set(asked)) == done["chunk_count"]  # each text asked once


async def test_chunking_disabled_marks_notes_disabled(make_settings: Any) -> None:
    async with running_app(make_settings(chunking_enabled=False)) as api:
        h = await api.new_user()
        note = await create(api, h, "## A\n\nbody")
        await asyncio.sleep(0.3)
        got = (await api.client.get(f"/v1/notes/{note['id']}", headers=h)).json()
        assert got["index_status"] == "disabled" and got["chunk_count"] == 0
        assert await api.container.db.note_chunks.count_documents({}) == 0
        settings = api.container.settings
    # Turning chunking back on indexes what was written meanwhile.
    async with running_app(settings.model_copy(update={"chunking_enabled": True})) as api:
        await wait_indexed(api, h, note["id"])


async def test_chunker_change_reindexes_and_reuses_what_it_can(make_settings: Any) -> None:
    content = (
        sectioned_note(6, seed=6, words=30)
        + "\n## Long\n\n"
        + " ".join(paragraph(__import__("random").Random(i), 40) for i in range(12))
    )
    settings = make_settings(chunking_max_tokens=300)
    async with running_app(settings) as api:
        h = await api.new_user()
        note = await create(api, h, content)
        first = await wait_indexed(api, h, note["id"])
    async with running_app(settings.model_copy(update={"chunking_max_tokens": 120})) as api:
        second = await wait_indexed(api, h, note["id"])
        assert second["chunking_version"] != first["chunking_version"]
        assert second["version"] == 1 and second["indexed_version"] == 1
        want = get_chunker(
            "hierarchical_markdown",
            max_chunk_tokens=120,
            min_chunk_tokens=50,
            tokenizer=api.container.embedder.tokenizer,
            max_input_tokens=api.container.embedder.max_input_tokens,
        ).chunk_note(content, "Big note")
        assert second["chunk_count"] == len(want) != first["chunk_count"]
        stats = second["last_index_stats"]
        assert stats["reused"] >= 6, "the short sections are unchanged and reuse their vectors"
        docs = await stored_chunks(api, note["id"])
        assert [d["content_hash"] for d in docs] == [c.content_hash for c in want]


async def test_shutdown_mid_run_hands_the_note_back(api: Api) -> None:
    """A worker cancelled while indexing releases its lease: the note is claimable at once
    and the interrupted run does not count as an attempt."""
    h = await api.new_user()
    reconciler = api.container.indexing.reconciler
    await api.container.indexing.workers.stop()  # drive the reconciler by hand
    started = asyncio.Event()

    class Slow:
        def __getattr__(self, name: str) -> Any:
            return getattr(api.container.embedder, name)

        async def embed(self, texts: list[str], **kw: Any) -> Any:
            started.set()
            await asyncio.sleep(60)

    reconciler.embedder = Slow()
    r = await api.client.post(
        "/v1/notes", json={"title": "T", "content_md": "## A\n\nx"}, headers=h
    )
    task = asyncio.create_task(reconciler.run_once())
    await asyncio.wait_for(started.wait(), 30)
    task.cancel()
    with __import__("pytest").raises(asyncio.CancelledError):
        await task

    doc = await api.container.db.notes.find_one({"_id": ObjectId(r.json()["id"])})
    assert doc["index_status"] == "pending" and doc["lease_token"] is None
    assert doc["index_attempts"] == 0
    reconciler.embedder = api.container.embedder
    outcome = await reconciler.run_once()
    assert outcome is not None and outcome.status == "indexed"


async def test_old_version_is_evicted_even_when_the_database_blips_after_the_commit(
    api: Api,
) -> None:
    """The swap commits the new version, then deletes the old one. A connection error on
    that delete is retried: the old chunks are not left for good."""
    from pymongo.errors import AutoReconnect

    h = await api.new_user()
    note = await create(api, h, sectioned_note(4, seed=5))
    await wait_indexed(api, h, note["id"])
    chunks = api.container.indexing.reconciler.chunks
    real = chunks.delete_older_versions
    calls: list[int] = []

    async def blips_once(note_id: Any, keep_version: int) -> int:
        # (version 1's own eviction may still be running: only version 2's is disturbed)
        if keep_version == 2:
            calls.append(keep_version)
            if len(calls) == 1:
                raise AutoReconnect("connection reset after the commit")
        return await real(note_id, keep_version)

    chunks.delete_older_versions = blips_once  # type: ignore[method-assign]
    r = await api.client.patch(
        f"/v1/notes/{note['id']}", json={"content_md": sectioned_note(4, seed=6)}, headers=h
    )
    assert r.json()["version"] == 2
    after = await wait_indexed(api, h, note["id"])
    assert after["index_status"] == "indexed" and after["indexed_version"] == 2
    for _ in range(100):
        if len(calls) >= 2:
            break
        await asyncio.sleep(0.05)
    assert calls == [2, 2]
    docs = await stored_chunks(api, note["id"])
    assert docs and {d["note_version"] for d in docs} == {2}


async def test_maintenance_finishes_an_eviction_a_dead_worker_left(
    make_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker killed between a swap's commit and deleting the old version leaves the old
    chunks behind; the note keeps `evict_pending` and the maintenance sweep deletes them
    (the crash test saw such leftovers when the kill landed in that window)."""
    # Only the sweep called below may run: the background one (every 30 s, so at some point
    # of a slow run) could otherwise delete the leftovers first and leave it nothing to do.
    monkeypatch.setattr(worker, "MAINTENANCE_EVERY_S", 3600.0)
    async with running_app(make_settings()) as api:
        await _dead_worker_eviction(api)


async def _dead_worker_eviction(api: Api) -> None:
    h = await api.new_user()
    note = await create(api, h, sectioned_note(4, seed=7))
    await wait_indexed(api, h, note["id"])
    # wait_indexed returns at version 1's commit; its run then evicts and clears the flag.
    # Patching before that run ends would let it end the wait below early (seen in a suite
    # run: version 2's run then evicted with the restored methods).
    await wait_evicted(api.container.db, ObjectId(note["id"]))
    reconciler = api.container.indexing.reconciler
    real_evict, real_clear = reconciler._evict, reconciler.queue.clear_eviction

    run_over = asyncio.Event()

    async def killed(*_: Any, **__: Any) -> None:  # the process died here
        return None

    async def killed_last_step(_note_id: Any, version: int) -> None:  # ...and the run's end
        if version == 2:
            run_over.set()

    reconciler._evict = killed  # type: ignore[method-assign]
    reconciler.queue.clear_eviction = killed_last_step  # type: ignore[method-assign]
    r = await api.client.patch(
        f"/v1/notes/{note['id']}", json={"content_md": sectioned_note(4, seed=8)}, headers=h
    )
    assert r.json()["version"] == 2
    await wait_indexed(api, h, note["id"])
    # wait_indexed sees the commit, which comes before the eviction: restoring the real
    # methods any earlier would let this very run evict with them.
    await asyncio.wait_for(run_over.wait(), 30)
    reconciler._evict, reconciler.queue.clear_eviction = real_evict, real_clear  # type: ignore[method-assign]
    left = await api.container.db.note_chunks.distinct("note_version")
    assert sorted(left) == [1, 2]
    raw = await api.container.db.notes.find_one({}, {"evict_pending": 1, "indexed_version": 1})
    assert raw is not None and raw["evict_pending"] is True and raw["indexed_version"] == 2

    result = await api.container.indexing.workers.maintenance_once(orphans=False)
    assert result.evicted > 0
    assert {d["note_version"] for d in await stored_chunks(api, note["id"])} == {2}
    raw = await api.container.db.notes.find_one({}, {"evict_pending": 1})
    assert raw is not None and "evict_pending" not in raw


class Gated:
    """The real embedder, but each call waits for `release` once `started` is set."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    async def embed(self, texts: list[str], **kw: Any) -> Any:
        self.started.set()
        await self.release.wait()
        return await self.real.embed(texts, **kw)


async def test_stop_lets_the_note_in_flight_finish_its_swap(api: Api) -> None:
    """SIGTERM (workers.stop) while a new version is being embedded: the worker stops
    claiming, finishes that note — commit and eviction — and only then exits, so a clean
    shutdown leaves no old chunks for the sweep (the crash test's second worker was
    terminated right after the last commit and left the old version behind)."""

    h = await api.new_user()
    note = await create(api, h, sectioned_note(4, seed=11))
    await wait_indexed(api, h, note["id"])
    workers = api.container.indexing.workers
    gated = Gated(api.container.embedder)
    api.container.indexing.reconciler.embedder = gated
    r = await api.client.patch(
        f"/v1/notes/{note['id']}", json={"content_md": sectioned_note(4, seed=12)}, headers=h
    )
    assert r.json()["version"] == 2
    await asyncio.wait_for(gated.started.wait(), 30)
    stopping = asyncio.create_task(workers.stop())
    await asyncio.sleep(0.3)
    assert not stopping.done(), "stop waits for the note in flight"
    gated.release.set()
    await asyncio.wait_for(stopping, 30)
    raw = await api.container.db.notes.find_one({"_id": ObjectId(note["id"])})
    assert raw is not None
    assert raw["index_status"] == "indexed" and raw["indexed_version"] == 2
    assert "evict_pending" not in raw and raw["lease_token"] is None
    versions = await api.container.db.note_chunks.distinct(
        "note_version", {"note_id": ObjectId(note["id"])}
    )
    assert versions == [2]


async def test_stop_gives_up_on_a_stuck_note_after_the_grace_period(api: Api) -> None:
    """A note whose embedding hangs does not hold shutdown past `stop_grace_s`: its loop is
    cancelled and the note handed back for the next worker."""

    h = await api.new_user()
    workers = api.container.indexing.workers
    workers.stop_grace_s = 0.5
    gated = Gated(api.container.embedder)  # never released
    api.container.indexing.reconciler.embedder = gated
    note = await create(api, h, "## A\n\nstuck")
    await asyncio.wait_for(gated.started.wait(), 30)
    loop = asyncio.get_running_loop()
    began = loop.time()
    await asyncio.wait_for(workers.stop(), 30)
    assert loop.time() - began < 5
    raw = await api.container.db.notes.find_one({"_id": ObjectId(note["id"])})
    assert raw is not None and raw["index_status"] == "pending" and raw["lease_token"] is None


async def test_maintenance_clears_the_eviction_flag_of_a_note_trashed_since(api: Api) -> None:
    """A worker died between a commit and its eviction, then the note was trashed (its
    removal deletes every chunk, so indexed_version is None). The sweep clears their flag
    too: else the 500 flagged notes it reads could all be such ones, starving real
    evictions."""
    h = await api.new_user()
    r = await api.client.post("/v1/notes", json={"title": "T", "content_md": "body"}, headers=h)
    note = await wait_indexed(api, h, r.json()["id"])
    assert (await api.client.delete(f"/v1/notes/{note['id']}", headers=h)).status_code == 200
    trashed = await wait_indexed(api, h, note["id"])
    assert trashed["status"] == "trashed" and trashed["indexed_version"] is None
    notes = api.container.db.notes
    await notes.update_one({"_id": ObjectId(note["id"])}, {"$set": {"evict_pending": True}})
    await api.container.indexing.workers.maintenance_once(orphans=False)
    raw = await notes.find_one({"_id": ObjectId(note["id"])})
    assert raw is not None and "evict_pending" not in raw


async def test_maintenance_gives_a_stranded_pending_note_its_attempts_back(
    make_settings: Any,
) -> None:
    """A pending note with its attempts used up matches no claim (an older release could
    leave one: a recheck during the last attempt). Maintenance requeues it; it indexes."""
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        # The startup maintenance pass would give the attempts back under our feet.
        await asyncio.wait_for(api.container.indexing.workers.maintained.wait(), 30)
        h = await api.new_user()
        r = await api.client.post(
            "/v1/notes", json={"title": "T", "content_md": "stranded body"}, headers=h
        )
        oid = ObjectId(r.json()["id"])
        notes = api.container.db.notes
        max_attempts = api.container.indexing.reconciler.config.max_attempts
        await notes.update_one({"_id": oid}, {"$set": {"index_attempts": max_attempts}})
        reconciler = api.container.indexing.reconciler
        assert await reconciler.run_once() is None  # no claim takes it
        result = await api.container.indexing.workers.maintenance_once(orphans=False)
        assert result.stranded == 1
        outcome = await reconciler.run_once()
        assert outcome is not None and outcome.note_id == oid and outcome.status == "indexed"


async def test_maintenance_deletes_uncommitted_chunks_of_a_failed_note(
    make_settings: Any,
) -> None:
    """A run wrote version 2 and never committed it, later runs failed before writing, the
    note ended `failed` at version 3 with version 1 indexed: nothing else deletes version
    2's chunks. The sweep deletes them; the indexed version and the current one (an edit
    may have a run writing it) stay."""
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        await asyncio.wait_for(api.container.indexing.workers.maintained.wait(), 30)
        h = await api.new_user()
        r = await api.client.post(
            "/v1/notes", json={"title": "T", "content_md": sectioned_note(3, seed=4)}, headers=h
        )
        oid = ObjectId(r.json()["id"])
        reconciler = api.container.indexing.reconciler
        assert (await reconciler.run_once()).status == "indexed"
        db = api.container.db
        committed = await db.note_chunks.find({"note_id": oid}).to_list()
        for stray in (2, 3):
            await db.note_chunks.insert_many(
                [
                    {**{k: v for k, v in d.items() if k != "_id"}, "note_version": stray}
                    for d in committed
                ]
            )
        await db.notes.update_one(
            {"_id": oid},
            {"$set": {"version": 3, "index_status": "failed", "index_error": "x: 503"}},
        )
        result = await api.container.indexing.workers.maintenance_once()  # the full sweep
        assert result.leftovers == len(committed)
        left = sorted(await db.note_chunks.distinct("note_version", {"note_id": oid}))
        assert left == [1, 3]
