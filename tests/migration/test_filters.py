"""Filters (--user, --limit, --since, --include-failed), re-indexing stale notes with
reused embeddings, and the dry run's reuse estimate — each run in-process."""

from __future__ import annotations

from datetime import timedelta

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from api.config import Settings
from tests.migration.support import (
    BASE_TIME,
    check_all_indexed,
    chunker_for,
    insert_legacy,
    run_in_process,
)


async def test_user_limit_and_since_select_only_their_notes(
    settings: Settings, db: AsyncDatabase
) -> None:
    alice, bob = ObjectId(), ObjectId()
    ids = await insert_legacy(db, 12, [alice, bob])  # even: alice, odd: bob; hourly
    originals = {d["_id"]: d async for d in db.notes.find({})}
    chunker = chunker_for(settings)

    code, dry = await run_in_process(settings, dry_run=True, authors=(alice,), limit=2)
    assert (code, dry["notes"]) == (0, 2)

    code, run = await run_in_process(settings, authors=(alice,), limit=2)
    assert (code, run["selected"], run["indexed"]) == (0, 2, 2)
    await check_all_indexed(db, chunker, ids[0:4:2])  # alice's first two, by _id
    untouched = [i for i in ids if i not in ids[0:4:2]]
    for note_id in untouched:
        assert await db.notes.find_one({"_id": note_id}) == originals[note_id]

    since = BASE_TIME + timedelta(hours=9)  # notes 9, 10, 11
    code, run = await run_in_process(settings, since=since)
    assert (code, run["selected"], run["indexed"]) == (0, 3, 3)
    await check_all_indexed(db, chunker, ids[9:])
    assert await db.notes.count_documents({"index_status": {"$exists": False}}) == 12 - 2 - 3

    code, run = await run_in_process(settings, authors=(bob,))
    assert (code, run["selected"]) == (0, 4)  # bob: 1, 3, 5, 7 (9 and 11 done above)
    assert await db.notes.count_documents({"author_id": bob, "index_status": "indexed"}) == 6


async def test_failed_notes_are_retried_unless_excluded(
    settings: Settings, db: AsyncDatabase
) -> None:
    ids = await insert_legacy(db, 4, [ObjectId()])
    await db.notes.update_many(
        {"_id": {"$in": ids[:2]}},
        {
            "$set": {
                "index_status": "failed",
                "index_error": "EmbeddingError: 500",
                "index_attempts": 5,
                "version": 1,
                "indexed_version": None,
                "chunk_count": 0,
                "next_attempt_at": BASE_TIME,
            }
        },
    )
    code, run = await run_in_process(settings, include_failed=False)
    assert (code, run["selected"], run["indexed"]) == (0, 2, 2)
    assert await db.notes.count_documents({"index_status": "failed"}) == 2

    code, dry = await run_in_process(settings, dry_run=True)
    assert dry["reasons"] == {"failed": 2}
    code, run = await run_in_process(settings)
    assert (code, run["selected"], run["indexed"], run["failed"]) == (0, 2, 2, 0)
    await check_all_indexed(db, chunker_for(settings), ids)
    assert await db.notes.count_documents({"index_error": None}) == 4


async def test_stale_chunker_reindexes_with_reused_embeddings(
    settings: Settings, db: AsyncDatabase
) -> None:
    ids = await insert_legacy(db, 6, [ObjectId()])
    code, first = await run_in_process(settings)
    assert code == 0 and first["embedded"] == first["chunks"] > 0
    # Another chunker version indexed two of them: same text, so every vector is reusable.
    await db.notes.update_many(
        {"_id": {"$in": ids[:2]}}, {"$set": {"chunking_version": "hierarchical_markdown:r0"}}
    )
    code, dry = await run_in_process(settings, dry_run=True)
    assert dry["reasons"] == {"stale_chunker": 2}
    assert dry["chunks"] > 0 and dry["reusable_chunks"] == dry["chunks"]
    assert dry["tokens_to_embed"] == 0
    code, run = await run_in_process(settings)
    assert (code, run["indexed"], run["embedded"]) == (0, 2, 0)
    assert run["reused"] == run["chunks"] == dry["chunks"]
    await check_all_indexed(db, chunker_for(settings), ids)
