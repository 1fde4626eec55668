"""A worker process SIGKILLed in the middle of indexing 200 notes: a new worker finishes
the job; every note ends indexed at its latest version with exactly the chunker's chunks,
no duplicates and no orphans."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import running_app
from tests.helpers import sectioned_note

ROOT = Path(__file__).resolve().parents[2]


def start_worker(settings: Any) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "MONGODB_URL": settings.mongodb_url,
        "MONGODB_DB": settings.mongodb_db,
        "EMBEDDING_PROVIDER": "local",
        "AUTONOTE_INDEX_LEASE_S": "2",
        "AUTONOTE_INDEX_POLL_S": "0.1",
        "LOG_LEVEL": "WARNING",
    }
    env.pop("OPENAI_API_KEY", None)
    return subprocess.Popen(
        [sys.executable, "-m", "api.cli", "worker", "--concurrency", "2"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def count_indexed(db: Any) -> int:
    return await db.notes.count_documents({"index_status": "indexed"})


async def test_sigkilled_worker_loses_nothing(make_settings: Any) -> None:
    settings = make_settings(autonote_index_workers=0)  # the API enqueues, workers index
    async with running_app(settings) as api:
        h = await api.new_user()
        ids = []
        for i in range(200):
            r = await api.client.post(
                "/v1/notes",
                json={"title": f"Note {i}", "content_md": sectioned_note(3, seed=i, words=25)},
                headers=h,
            )
            ids.append(r.json()["id"])
        db = api.container.db
        first = start_worker(settings)
        try:
            for _ in range(1200):
                if await count_indexed(db) >= 40:
                    break
                await asyncio.sleep(0.05)
            first.send_signal(signal.SIGKILL)
            first.wait()
            killed_at = await count_indexed(db)
            assert 40 <= killed_at < 200, "killed in the middle of the run"
            # Edit a few notes while no worker runs: the new worker must index the latest.
            for note_id in ids[:5]:
                await api.client.patch(
                    f"/v1/notes/{note_id}",
                    json={"content_md": "## Edited\n\nafter the crash"},
                    headers=h,
                )
        finally:
            if first.poll() is None:
                first.kill()
        second = start_worker(settings)
        try:
            for _ in range(3000):
                if await count_indexed(db) == 200:
                    break
                await asyncio.sleep(0.05)
        finally:
            second.terminate()
            second.wait(30)
        notes = await db.notes.find({}).to_list()
        assert all(
            n["index_status"] == "indexed" and n["indexed_version"] == n["version"] for n in notes
        )
        chunker = api.container.chunker
        total = 0
        for n in notes:
            docs = await db.note_chunks.find({"note_id": n["_id"]}).sort("chunk_index").to_list()
            want = chunker.chunk_note(n["content_md"], n["title"])
            assert [d["note_version"] for d in docs] == [n["version"]] * len(want), "no orphans"
            assert [d["content_hash"] for d in docs] == [c.content_hash for c in want]
            assert n["chunk_count"] == len(want)
            total += len(want)
        assert await db.note_chunks.count_documents({}) == total, "no duplicates anywhere"
