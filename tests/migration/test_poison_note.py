"""A note whose indexing kills the process (out of memory, a native crash) must not stop
every rerun of the migration at the same place.

Enqueueing keeps the attempt budget of a note whose last run died, so the crash-loop guard
(`AUTONOTE_INDEX_MAX_ATTEMPTS` claims, then `failed`) fires across reruns instead of every
rerun claiming the note again and dying again. Here the real CLI runs in a child process
whose chunker dies (`os._exit`) on one note.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from api.config import Settings
from tests.migration.support import (
    ROOT,
    check_all_indexed,
    chunker_for,
    cli_env,
    insert_legacy,
    run_in_process,
)

POISON = "POISON-PILL"
# The CLI, with a chunker that kills its process on the poisoned note.
CRASHING_CLI = f"""
import os, sys
from api.chunking.markdown import MarkdownChunker
chunk_note = MarkdownChunker.chunk_note
def dying(self, content, title=""):
    if {POISON!r} in content:
        os._exit(9)
    return chunk_note(self, content, title)
MarkdownChunker.chunk_note = dying
from scripts.migrate_notes_to_chunks import main
sys.argv = ["migrate", *sys.argv[1:]]
main()
"""
BUDGET = 2  # attempts (5 by default): fewer runs, same rule
ARGS = ("--concurrency", "1", "--batch-size", "4", "--lease-s", "1", "--progress", "none")


def run_cli(settings: Settings) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-c", CRASHING_CLI, *ARGS, "--json"],
        cwd=ROOT,
        env=cli_env(settings, LOG_LEVEL="WARNING", AUTONOTE_INDEX_MAX_ATTEMPTS=str(BUDGET)),
        capture_output=True,
        timeout=240,
    )
    assert proc.returncode != 2, proc.stderr.decode()[-2000:]
    lines = proc.stdout.decode().strip().splitlines()
    return proc.returncode, (json.loads(lines[-1]) if lines else {})


@pytest.mark.timeout(900)
async def test_a_note_that_kills_the_process_fails_after_the_budget(
    settings: Settings, db: AsyncDatabase
) -> None:
    ids = await insert_legacy(db, 10, [ObjectId()])
    poisoned = ids[2]
    await db.notes.update_one(
        {"_id": poisoned}, {"$set": {"content_md": f"## Trap\n\n{POISON} in this note."}}
    )
    codes = []
    for _ in range(BUDGET + 2):
        code, result = await asyncio.to_thread(run_cli, settings)
        codes.append(code)
        if code != 9:
            break
        await asyncio.sleep(1.1)  # the dead run's lease runs out
    # Every run until the budget is spent dies on it; the next one goes past it.
    assert codes == [9] * BUDGET + [1], codes
    assert result["failed"] == 1 and result["indexed"] == len(ids) - 3, result
    assert result["failures"][0]["note_id"] == str(poisoned)
    note = await db.notes.find_one({"_id": poisoned})
    assert note["index_status"] == "failed" and note["reserved_until"] is None, note
    await check_all_indexed(db, chunker_for(settings), [i for i in ids if i != poisoned])


async def test_the_dry_run_counts_a_note_out_of_attempts_apart(
    settings: Settings, db: AsyncDatabase
) -> None:
    """Such a note is no work: the run records it failed without chunking or embedding
    it, so the dry run does not count it (or its tokens) as notes to index."""
    ids = await insert_legacy(db, 6, [ObjectId()])
    died = datetime.now(UTC) - timedelta(minutes=5)
    for note_id, attempts in ((ids[0], BUDGET), (ids[1], BUDGET - 1)):
        await db.notes.update_one(
            {"_id": note_id},
            {
                "$set": {
                    "index_status": "indexing",
                    "lease_expires_at": died,
                    "index_attempts": attempts,
                }
            },
        )
    budget = settings.model_copy(update={"autonote_index_max_attempts": BUDGET})
    code, dry = await run_in_process(budget, dry_run=True)
    assert code == 0 and dry["out_of_attempts"] == 1 and dry["notes"] == len(ids) - 1, dry
    code, run = await run_in_process(budget)
    assert run["failed"] == 1 and run["indexed"] == len(ids) - 1, run
    assert run["failures"][0]["note_id"] == str(ids[0])
