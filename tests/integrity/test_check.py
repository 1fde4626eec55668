"""The checker against the real server: a clean database passes; every kind of violation,
injected directly into the collections, is found; `--repair` fixes it, the workers converge
and the next check is clean. The notes' content is never touched."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from bson import ObjectId

from api.chunk_store.vectors import to_bson_vector
from api.db.client import CHUNK_UNIQUE_INDEX
from api.integrity import CheckReport
from tests.integrity.conftest import World


def by_kind(report: CheckReport) -> dict[str, Any]:
    return {s.kind: s for s in report.summaries(10) if s.notes}


async def contents(world: World) -> dict[ObjectId, tuple[str, str]]:
    docs = await world.db.notes.find({}, {"title": 1, "content_md": 1}).to_list()
    return {d["_id"]: (d["title"], d["content_md"]) for d in docs}


async def repair_and_converge(world: World, report: CheckReport) -> None:
    before = await contents(world)
    checker = world.checker()
    result = await checker.repair(report)
    assert report.repair is result
    await world.converge()
    after = await world.check()
    assert after.ok and after.findings == [], after.to_dict()
    assert await contents(world) == before, "repair never changes a note's content"


async def test_clean_database_passes(world: World) -> None:
    report = await world.check()
    assert report.ok and report.findings == [] and report.suspects == 0
    assert report.notes_scanned == len(world.note_ids)
    total = await world.db.note_chunks.count_documents({})
    assert report.chunks_scanned == total > 10
    # The fixture really has split tables and re-fenced code fragments (exempt from slicing).
    types = {
        (
            c["chunk_type"],
            "header_repeated" in c.get("metadata", {}) or "code_part" in c.get("metadata", {}),
        )
        async for c in world.db.note_chunks.find({}, {"chunk_type": 1, "metadata": 1})
    }
    assert ("table", True) in types and ("code", True) in types
    assert report.unique_index


async def test_index_behind(world: World) -> None:
    note_id = world.note_ids[0]
    await world.db.notes.update_one({"_id": note_id}, {"$inc": {"version": 1}})
    report = await world.check()
    found = by_kind(report)
    assert set(found) == {"index_behind"} and found["index_behind"].notes == 1
    assert str(note_id) in found["index_behind"].examples[0]
    await repair_and_converge(world, report)
    note = await world.db.notes.find_one({"_id": note_id})
    assert note["indexed_version"] == note["version"]


async def test_not_queued_legacy_note(world: World) -> None:
    note_id = world.note_ids[1]
    await world.db.notes.update_one({"_id": note_id}, {"$unset": {"index_status": ""}})
    report = await world.check()
    assert set(by_kind(report)) == {"not_queued"}
    await repair_and_converge(world, report)


async def test_failed_is_listed_and_retry_failed_requeues(world: World) -> None:
    note_id = world.note_ids[2]
    await world.db.notes.update_one(
        {"_id": note_id}, {"$set": {"index_status": "failed", "index_error": "EmbeddingError: x"}}
    )
    report = await world.check()
    found = by_kind(report)
    assert (
        report.ok
        and set(found) == {"failed"}
        and "EmbeddingError: x" in found["failed"].examples[0]
    )
    checker = world.checker()
    assert (await checker.repair(report)).notes_requeued == 0, "failed notes stay put"
    await checker.repair(report, retry_failed=True)
    await world.converge()
    note = await world.db.notes.find_one({"_id": note_id})
    assert note["index_status"] == "indexed" and note["index_error"] is None


async def test_chunk_count(world: World) -> None:
    note_id = world.note_ids[0]
    await world.db.notes.update_one({"_id": note_id}, {"$inc": {"chunk_count": 5}})
    report = await world.check()
    assert set(by_kind(report)) == {"chunk_count"}
    await repair_and_converge(world, report)
    note = await world.db.notes.find_one({"_id": note_id})
    assert note["chunk_count"] == len(await world.chunks(note_id))


async def test_a_missing_chunk_is_rebuilt(world: World) -> None:
    note_id = world.note_ids[0]
    chunks = await world.chunks(note_id)
    await world.db.note_chunks.delete_one({"_id": chunks[1]["_id"]})
    report = await world.check()
    assert set(by_kind(report)) == {"chunk_count"}
    await repair_and_converge(world, report)
    rebuilt = await world.chunks(note_id)
    assert [c["content_hash"] for c in rebuilt] == [c["content_hash"] for c in chunks]


async def test_orphans_of_a_missing_note(world: World) -> None:
    chunks = await world.chunks(world.note_ids[0])
    ghost = ObjectId()
    await world.db.note_chunks.insert_many(
        [{**c, "_id": ObjectId(), "note_id": ghost} for c in chunks[:3]]
    )
    report = await world.check()
    found = by_kind(report)
    assert set(found) == {"orphan_chunks"} and found["orphan_chunks"].chunks == 3
    assert "does not exist" in found["orphan_chunks"].examples[0]
    await repair_and_converge(world, report)
    assert await world.db.note_chunks.count_documents({"note_id": ghost}) == 0
    assert report.repair is not None and report.repair.chunks_deleted == 3


async def test_orphans_of_a_trashed_note(world: World) -> None:
    note_id = world.note_ids[3]
    n = len(await world.chunks(note_id))
    # Trashed behind the queue's back: the note says it converged, its chunks are still there.
    await world.db.notes.update_one({"_id": note_id}, {"$set": {"status": "trashed"}})
    report = await world.check()
    found = by_kind(report)
    assert set(found) == {"orphan_chunks"} and found["orphan_chunks"].chunks == n
    await repair_and_converge(world, report)
    assert await world.chunks(note_id) == []


async def test_orphans_of_a_dead_version(world: World) -> None:
    note_id = world.note_ids[0]
    chunks = await world.chunks(note_id)
    old = [{**c, "_id": ObjectId(), "note_version": c["note_version"] - 1} for c in chunks]
    await world.db.note_chunks.insert_many(old)
    report = await world.check()
    found = by_kind(report)
    assert set(found) == {"orphan_chunks"} and found["orphan_chunks"].chunks == len(old)
    await repair_and_converge(world, report)
    assert [c["_id"] for c in await world.chunks(note_id)] == [c["_id"] for c in chunks]


async def test_duplicates_without_the_unique_index(world: World) -> None:
    await world.db.note_chunks.drop_index(CHUNK_UNIQUE_INDEX)
    note_id = world.note_ids[1]
    chunks = await world.chunks(note_id)
    await world.db.note_chunks.insert_many([{**c, "_id": ObjectId()} for c in chunks[:2]])
    report = await world.check()
    found = by_kind(report)
    assert set(found) == {"duplicate_chunks"} and found["duplicate_chunks"].chunks == 2
    assert not report.unique_index
    await repair_and_converge(world, report)
    assert [c["_id"] for c in await world.chunks(note_id)] == [c["_id"] for c in chunks]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"embedding": to_bson_vector(np.ones(12, dtype=np.float32))}, "12 dimensions"),
        ({"embedding": [0.5] * 384}, "not a BSON binary vector"),
        ({"embedding_model": "text-embedding-3-small@1536"}, "embedded with"),
    ],
    ids=["dimensions", "array-of-doubles", "model"],
)
async def test_bad_vector(world: World, change: dict[str, Any], problem: str) -> None:
    note_id = world.note_ids[2]
    chunk = (await world.chunks(note_id))[0]
    await world.db.note_chunks.update_one({"_id": chunk["_id"]}, {"$set": change})
    report = await world.check()
    found = by_kind(report)
    assert set(found) == {"bad_vector"} and problem in found["bad_vector"].examples[0]
    await repair_and_converge(world, report)
    rebuilt = (await world.chunks(note_id))[0]
    assert rebuilt["embedding"] == chunk["embedding"]  # same text, same vector again


async def test_bad_offsets(world: World) -> None:
    note_id = world.note_ids[0]
    chunk = (await world.chunks(note_id))[-1]
    await world.db.note_chunks.update_one({"_id": chunk["_id"]}, {"$inc": {"end_offset": 10_000}})
    report = await world.check()
    assert set(by_kind(report)) == {"bad_offsets"}
    await repair_and_converge(world, report)


async def test_content_mismatch(world: World) -> None:
    note_id = world.note_ids[3]
    chunk = (await world.chunks(note_id))[0]
    await world.db.note_chunks.update_one(
        {"_id": chunk["_id"]}, {"$set": {"content_md": chunk["content_md"] + " (edited)"}}
    )
    report = await world.check()
    assert set(by_kind(report)) == {"content_mismatch"}
    await repair_and_converge(world, report)


async def test_author_mismatch(world: World) -> None:
    intruder = ObjectId()
    note_id = world.note_ids[0]
    chunks = await world.chunks(note_id)
    await world.db.note_chunks.update_many(
        {"_id": {"$in": [c["_id"] for c in chunks[:2]]}}, {"$set": {"author_id": intruder}}
    )
    report = await world.check()
    found = by_kind(report)
    assert set(found) == {"author_mismatch"} and found["author_mismatch"].chunks == 2
    await repair_and_converge(world, report)
    assert await world.db.note_chunks.count_documents({"author_id": intruder}) == 0


async def test_many_kinds_at_once(world: World) -> None:
    a, b, c, d = world.note_ids
    await world.db.notes.update_one({"_id": a}, {"$inc": {"version": 1}})
    await world.db.notes.update_one({"_id": b}, {"$set": {"chunk_count": 999}})
    chunk = (await world.chunks(c))[0]
    await world.db.note_chunks.update_one({"_id": chunk["_id"]}, {"$set": {"author_id": b}})
    await world.db.note_chunks.insert_one({**chunk, "_id": ObjectId(), "note_id": ObjectId()})
    report = await world.check()
    assert set(by_kind(report)) == {
        "index_behind",
        "chunk_count",
        "author_mismatch",
        "orphan_chunks",
    }
    assert report.suspects == 4 and len(report.violations) == 4
    await repair_and_converge(world, report)
    assert (await world.db.notes.find_one({"_id": d}))["index_status"] == "indexed"


async def test_a_note_whose_id_is_not_an_object_id_is_reported_never_indexed(
    world: World,
) -> None:
    """A legacy `_id` the API cannot address: indexed, every search that ranked its chunks
    would fail with a 500 (InvalidId). Search skips such chunks, the check reports the
    note (info) and deletes its chunks, and the queue never hands it to a worker."""
    source = await world.db.notes.find_one({"_id": world.note_ids[0]})
    chunks = await world.chunks(world.note_ids[0])
    legacy = {**source, "_id": "legacy-string-id", "indexed_at": datetime.now(UTC)}
    await world.db.notes.insert_one(legacy)
    await world.db.note_chunks.insert_many(
        [{**c, "_id": ObjectId(), "note_id": "legacy-string-id"} for c in chunks]
    )
    index = world.api.container.search.backend.index
    for _ in range(200):  # the local index's poll loads the planted version
        if index.note_version("legacy-string-id") is not None:
            break
        await asyncio.sleep(0.05)
    assert index.note_version("legacy-string-id") == source["indexed_version"]
    words = " ".join(chunks[0]["content_md"].split()[:6])
    r = await world.api.client.post(
        "/v1/search", json={"query": words, "mode": "keyword"}, headers=world.headers
    )
    assert r.status_code == 200, r.text
    assert {n["note_id"] for n in r.json()["results"]} <= {str(n) for n in world.note_ids}

    report = await world.check()
    found = by_kind(report)
    assert set(found) == {"unaddressable", "orphan_chunks"}, found
    assert "legacy-string-id" in found["unaddressable"].examples[0]
    assert found["orphan_chunks"].chunks == len(chunks) and not report.ok
    result = await world.checker().repair(report)
    assert (result.chunks_deleted, result.notes_requeued) == (len(chunks), 0)
    assert await world.db.note_chunks.count_documents({"note_id": "legacy-string-id"}) == 0

    # Queued anyway (as the old repair did): no worker claims it.
    await world.db.notes.update_one(
        {"_id": "legacy-string-id"},
        {"$set": {"index_status": "pending", "next_attempt_at": datetime.now(UTC)}},
    )
    await asyncio.sleep(1.5)  # the workers poll every 0.5 s
    assert await world.api.container.indexing.reconciler.run_once() is None  # nothing claimable
    note = await world.db.notes.find_one({"_id": "legacy-string-id"})
    assert note["index_status"] == "pending"
    assert await world.db.note_chunks.count_documents({"note_id": "legacy-string-id"}) == 0
    after = await world.check()
    assert after.ok and set(by_kind(after)) <= {"unaddressable"}
