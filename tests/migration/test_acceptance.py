"""The migration's acceptance run on the real embedded server, the real chunker and the local model,
with the real CLI as a child process: 500 legacy notes → the dry run reports them and
changes nothing → a run stopped with Ctrl-C, a run SIGKILLed half-way, and a third run that
completes → every note indexed exactly once, no duplicate chunk → a further run selects
nothing, changes nothing and exits 0."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from api.config import Settings
from api.providers import build_embedder
from tests.migration.support import (
    LEGACY_FIELDS,
    check_all_indexed,
    chunker_for,
    insert_legacy,
    reserved_now,
    run_in_process,
    snapshot,
    start_cli,
)

N = 500
RUN_ARGS = ("--progress", "log", "--progress-interval", "0.5", "--lease-s", "3")


async def indexed(db: AsyncDatabase) -> int:
    return await db.notes.count_documents({"index_status": "indexed"})


async def settled_indexed(db: AsyncDatabase) -> int:
    """`indexed` once it stops moving. A write the killed process sent just before
    SIGKILL is still applied by the server after the process is gone; counting at once
    was one short of the third run's view about once in five full runs (287 vs 288)."""
    last = await indexed(db)
    while True:
        await asyncio.sleep(0.5)
        now = await indexed(db)
        if now == last:
            return now
        last = now


def tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else ""


async def wait_for(
    db: AsyncDatabase, proc: subprocess.Popen[bytes], at_least: int, log: Path
) -> int:
    """Poll until `at_least` notes are indexed (the child must still be running)."""
    for _ in range(6000):
        count = await indexed(db)
        if count >= at_least:
            return count
        assert proc.poll() is None, f"exited early with {proc.returncode}:\n{tail(log)}"
        await asyncio.sleep(0.05)
    raise AssertionError(f"only {await indexed(db)} notes indexed in time")


async def wait_exit(proc: subprocess.Popen[bytes], timeout_s: float = 600) -> int:
    for _ in range(int(timeout_s * 20)):
        if proc.poll() is not None:
            return proc.returncode
        await asyncio.sleep(0.05)
    proc.kill()
    raise AssertionError("migration did not finish in time")


def progress_lines(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.startswith("{")]
    return [x for x in lines if x.get("event") == "migration.progress"]


# Seconds on a quiet machine; minutes when many jobs share 2 cores: don't fail on load.
@pytest.mark.timeout(900)
async def test_500_legacy_notes_dry_run_interrupt_kill_resume(
    settings: Settings, db: AsyncDatabase, tmp_path: Path
) -> None:
    ids = await insert_legacy(db, N, [ObjectId(), ObjectId()])
    sample = await db.notes.find_one({"_id": ids[0]})
    assert set(sample) <= LEGACY_FIELDS, "legacy documents carry no index field"
    assert await db.notes.count_documents({"version": {"$exists": True}}) not in (0, N)
    chunker = chunker_for(settings)
    tokenizer = build_embedder(settings, None).tokenizer
    want_chunks = want_tokens = 0
    async for note in db.notes.find({}):
        chunks = chunker.chunk_note(note["content_md"], note["title"])
        want_chunks += len(chunks)
        want_tokens += sum(tokenizer.count(c.embedding_text) for c in chunks)

    # Dry run: the chunker's exact counts, and not one byte changed.
    before = await snapshot(db)
    code, dry = await run_in_process(settings, dry_run=True)
    assert code == 0 and await snapshot(db) == before, "the dry run changed the database"
    assert (dry["notes"], dry["chunks"], dry["tokens"]) == (N, want_chunks, want_tokens)
    assert dry["reasons"] == {"legacy": N}
    assert dry["tokens_to_embed"] == want_tokens and dry["reusable_tokens"] == 0
    assert dry["estimated_cost_usd"] == 0.0  # the local model is free

    # Run 1: Ctrl-C stops it cleanly with a summary and exit code 130.
    log1 = tmp_path / "run1.log"
    with log1.open("wb") as err:
        first = start_cli(settings, *RUN_ARGS, stderr=err)
        await wait_for(db, first, 60, log1)
        first.send_signal(signal.SIGINT)
        assert await wait_exit(first) == 130, tail(log1)
    out1 = first.stdout.read().decode() if first.stdout else ""
    assert "Migration interrupted" in out1 and "run the same command again" in out1
    stopped_at = await indexed(db)
    assert stopped_at < N
    # It handed what it had reserved back to every worker (`api.indexing.queue`).
    assert await reserved_now(db) == 0

    # Run 2: SIGKILLed half-way, leaving leases and maybe half-written chunks behind.
    log2 = tmp_path / "run2.log"
    with log2.open("wb") as err:
        second = start_cli(settings, *RUN_ARGS, stderr=err)
        await wait_for(db, second, stopped_at + 150, log2)
        second.send_signal(signal.SIGKILL)
        await wait_exit(second)
    killed_at = await settled_indexed(db)
    assert stopped_at < killed_at < N, "killed in the middle of the run"
    # Its reservations outlive it (workers wait for them to run out); the rerun takes them.
    assert await reserved_now(db) > 0

    # Run 3 resumes and completes.
    log3 = tmp_path / "run3.log"
    with log3.open("wb") as err:
        third = start_cli(settings, *RUN_ARGS, "--json", stderr=err)
        assert await wait_exit(third) == 0, tail(log3)
    result = json.loads((third.stdout.read() if third.stdout else b"{}").decode())
    assert result["failed"] == 0 and result["indexed"] == result["selected"] >= N - killed_at
    assert await check_all_indexed(db, chunker, ids) == want_chunks

    # Non-TTY progress: structured lines with done/total/rate/eta_s, done growing.
    lines = progress_lines(log2)
    assert len(lines) >= 2 and all({"done", "total", "rate", "eta_s"} <= set(x) for x in lines)
    assert lines[-1]["done"] > lines[0]["done"] and lines[0]["total"] == N - stopped_at

    # Nothing left: selects nothing, changes nothing, exits 0.
    after = await snapshot(db)
    code, again = await run_in_process(settings)
    assert (code, again["selected"], again["done"], again["embedded"]) == (0, 0, 0, 0)
    assert await snapshot(db) == after, "a run with nothing to do changes nothing"
    migrated = await db.notes.find_one({"_id": ids[0]})
    assert migrated["version"] == sample.get("version", 1)
    assert migrated["updated_at"] == sample["created_at"], "filled from created_at"
    assert (migrated["content_md"], migrated["tags"]) == (sample["content_md"], sample["tags"])
