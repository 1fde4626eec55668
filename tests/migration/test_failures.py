"""An embedding provider that keeps failing (the OpenAI stub answering 500): the notes end
`failed` with the error, the run exits 1; once the provider recovers, a rerun retries
exactly those notes and exits 0. The rate limiter wraps the real OpenAI connector."""

from __future__ import annotations

from typing import Any

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from tests.migration.support import (
    check_all_indexed,
    chunker_for,
    insert_legacy,
    run_in_process,
)


async def test_failing_provider_exits_1_then_a_rerun_recovers(
    make_settings: Any, openai_stub: Any, db: AsyncDatabase
) -> None:
    settings = make_settings(
        embedding_provider="openai",
        openai_api_key="sk-test",
        openai_base_url=openai_stub.base_url,
        openai_max_retries=1,
        autonote_index_max_attempts=2,
        autonote_index_backoff_base_s=0.05,
        autonote_index_backoff_max_s=0.1,
    )
    ids = await insert_legacy(db, 5, [ObjectId()])
    code, dry = await run_in_process(settings, dry_run=True)
    assert dry["embedding_model"] == "text-embedding-3-small"
    assert dry["estimated_cost_usd"] == dry["tokens_to_embed"] * 0.02 / 1e6 > 0
    assert openai_stub.requests_to("/v1/embeddings") == [], "a dry run embeds nothing"

    openai_stub.fail_next(500, count=1000, path="/v1/embeddings")
    code, run = await run_in_process(settings, concurrency=2)
    assert code == 1
    assert (run["selected"], run["failed"], run["indexed"]) == (5, 5, 0)
    assert {f["note_id"] for f in run["failures"]} == {str(i) for i in ids}
    assert all("500" in f["error"] for f in run["failures"])
    failed = await db.notes.find({}).to_list()
    assert all(n["index_status"] == "failed" and "500" in n["index_error"] for n in failed)
    assert await db.note_chunks.count_documents({}) == 0
    # Two reconciler attempts per note, one HTTP call each, then it stopped trying.
    assert len(openai_stub.requests_to("/v1/embeddings")) == 10

    openai_stub.reset()
    code, run = await run_in_process(
        settings, rate_limit_requests_per_min=600, rate_limit_tokens_per_min=100_000
    )
    assert code == 0, run
    assert (run["selected"], run["indexed"], run["failed"]) == (5, 5, 0)
    await check_all_indexed(db, chunker_for(settings), ids)
    assert all(c.status == 200 for c in openai_stub.requests_to("/v1/embeddings"))


async def test_duplicate_chunks_from_a_naive_migration_stop_the_run_with_a_hint(
    settings: Any, db: AsyncDatabase, capsys: Any
) -> None:
    ids = await insert_legacy(db, 2, [ObjectId()])
    # What a naive migration script leaves when run twice: the same chunk inserted twice.
    naive = {"note_id": ids[0], "note_version": 1, "chunk_index": 0, "content_md": "x"}
    await db.note_chunks.insert_many([dict(naive), dict(naive)])
    before = await db.notes.find({}).to_list()
    code, _ = await run_in_process(settings)
    assert code == 2
    err = capsys.readouterr().err
    assert "cannot use the database" in err and "earlier migration" in err
    assert await db.notes.find({}).to_list() == before, "nothing changed"
    assert await db.note_chunks.count_documents({}) == 2
