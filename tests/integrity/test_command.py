"""`autonote check` as a process (exit codes, table, JSON, --repair), and the checker on a
live database while notes are being edited and re-indexed (no false alarms)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from pathlib import Path

from api.integrity import IntegrityChecker
from tests.helpers import sectioned_note
from tests.integrity.conftest import World

ROOT = Path(__file__).resolve().parents[2]


async def autonote_check(world: World | None, *args: str, **env: str) -> tuple[int, str, str]:
    """Run `python -m api.cli check ARGS` against the world's database."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MONGODB_"))}
    if world is not None:
        base |= {"MONGODB_URL": world.settings.mongodb_url, "MONGODB_DB": world.db.name}
    base |= {"EMBEDDING_PROVIDER": "local", "LOG_LEVEL": "WARNING", "COLUMNS": "200", **env}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "api.cli", "check", *args, cwd=ROOT, env=base,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_cli_clean_then_violation_then_repair(world: World) -> None:
    code, out, err = await autonote_check(world)
    assert code == 0, err
    assert "result: clean" in out and "orphan_chunks ok" in out

    note_id = world.note_ids[0]
    await world.db.notes.update_one({"_id": note_id}, {"$set": {"chunk_count": 42}})
    code, out, _ = await autonote_check(world, "--json")
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False and report["violations"] == 1
    assert report["kinds"]["chunk_count"]["notes"] == 1
    assert str(note_id) in report["kinds"]["chunk_count"]["examples"][0]
    assert report["repair"] is None, "read-only by default"
    assert (await world.db.notes.find_one({"_id": note_id}))["chunk_count"] == 42

    code, out, _ = await autonote_check(world, "--repair", "--json")
    assert code == 1, "the database was not clean when checked"
    assert json.loads(out)["repair"] == {"notes_requeued": 1, "chunks_deleted": 0}
    await world.converge()
    code, out, _ = await autonote_check(world)
    assert code == 0 and "result: clean" in out


async def test_cli_violation_table(world: World) -> None:
    chunk = await world.db.note_chunks.find_one({"note_id": world.note_ids[1]})
    await world.db.note_chunks.update_one({"_id": chunk["_id"]}, {"$set": {"start_offset": -5}})
    code, out, _ = await autonote_check(world)
    assert code == 1
    assert "bad_offsets VIOLATION" in out and str(chunk["_id"]) in out
    assert "result: 1 violation(s)" in out


async def test_cli_unreachable_database_exits_2_quickly() -> None:
    """Quickly: server selection gives up within MONGODB_TIMEOUT_MS, at least 1 s (the
    ping's budget in `api.migration.execute.connect`), as the driver's error reports it;
    not after the driver's default 30 s or the 15 s socket timeout."""
    code, _, err = await autonote_check(
        None, MONGODB_URL="mongodb://127.0.0.1:9/?directConnection=true", MONGODB_TIMEOUT_MS="500"
    )
    assert code == 2 and "database error: ServerSelectionTimeoutError" in err, err
    assert "connectTimeoutMS: 500.0ms" in err, err  # the setting reached the driver
    waited = re.search(r"Timeout: ([\d.]+)s,", err)
    assert waited is not None and float(waited[1]) <= 1.0, err


async def test_no_false_alarms_while_notes_are_edited(world: World) -> None:
    """Edits keep re-indexing notes (new version inserted, flipped, old one evicted) while
    the checker scans: whatever the scan catches mid-flight, confirmation clears."""
    stop = asyncio.Event()
    edits = 0

    async def edit() -> None:
        nonlocal edits
        while not stop.is_set():
            note_id = world.note_ids[edits % len(world.note_ids)]
            r = await world.api.client.patch(
                f"/v1/notes/{note_id}",
                json={"content_md": sectioned_note(3, seed=edits, words=20)},
                headers=world.headers,
            )
            assert r.status_code == 200, r.text
            edits += 1
            await asyncio.sleep(0.05)

    writer = asyncio.create_task(edit())
    reports = []
    try:
        # 8 s of scans at least, and on a slow machine until enough edits and scans ran.
        deadline = time.monotonic() + 8
        while not writer.done() and (
            time.monotonic() < deadline or edits <= 10 or len(reports) < 2
        ):
            reports.append(await IntegrityChecker(world.db, world.expect, settle_s=0.5).run())
    finally:
        stop.set()
        await writer
    assert edits > 10 and len(reports) >= 2
    for report in reports:
        assert report.ok, report.findings
    await world.converge()
    final = await world.check()
    assert final.ok and final.findings == []


async def test_cli_refuses_a_database_without_notes(world: World) -> None:
    """A mistyped MONGODB_DB is refused (exit 2), as a mistyped AUTONOTE_DATA_DIR is, not
    checked as "0 notes, 0 chunks … result: clean"."""
    code, out, err = await autonote_check(world, MONGODB_DB=world.db.name + "_typo")
    assert code == 2 and "has no notes collection" in err, (out, err)
    assert world.db.name + "_typo" not in await world.db.client.list_database_names()
