"""(b) edit-to-searchable latency and (c) indexing throughput, on the embedded server with
the local ONNX model.

(b) A 1 000-line realistic note is indexed; then one prose paragraph at a time is rewritten
with `PATCH` while the app's own background workers run (the default deployment). The clock
starts when the PATCH returns and stops when the note's `indexed_version` is the new version
AND every chunk the edit created is in `note_chunks` (and, if a `POST /v1/search` route is
wired into the app, when search returns the edited text). Interleaved with the edits, the
baseline: the same note indexed from scratch (new author, empty embedding cache: every chunk
embedded), timed the same way from its POST.

(c) 200 fresh notes are queued while no worker runs, then released at once to one worker
loop, two loops in one process, or two `autonote worker` processes (one loop each); the
clock stops when all are indexed.
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bson import ObjectId

from api.config import Settings
from api.indexing.worker import IndexWorkers
from benchmarks.common import REPO_ROOT
from benchmarks.indexing_notes import generate_note, paragraph, rewrite_paragraph
from benchmarks.sample_note import realistic_note
from benchmarks.service_harness import InProcessApp, in_process_app, wait_until

POLL_S = 0.005


@dataclass
class LatencyResult:
    """(b): seconds from write to searchable, for one-paragraph edits and full re-indexes."""

    lines: int = 0
    note_bytes: int = 0
    chunks: int = 0
    edit_s: list[float] = field(default_factory=list)
    edit_embedded: list[int] = field(default_factory=list)
    edit_index_ms: list[float] = field(default_factory=list)  # reconciler's duration_ms
    full_s: list[float] = field(default_factory=list)
    full_embedded: list[int] = field(default_factory=list)
    search: str = "no `POST /v1/search` route in the app at run time: not included"
    search_s: list[float] = field(default_factory=list)


def search_route(app: Any) -> bool:
    """True when the app serves `POST /v1/search` (per its OpenAPI document: included
    routers are not always listed in `app.routes`)."""
    return "post" in app.openapi().get("paths", {}).get("/v1/search", {})


async def _visible(
    running: InProcessApp, note_id: ObjectId, version: int, hashes: set[str]
) -> bool:
    db = running.container.db
    note = await db.notes.find_one({"_id": note_id}, {"indexed_version": 1})
    if note is None or note.get("indexed_version") != version:
        return False
    found = await db.note_chunks.count_documents(
        {"note_id": note_id, "note_version": version, "content_hash": {"$in": sorted(hashes)}}
    )
    return found == len(hashes)


async def _searchable(
    running: InProcessApp, headers: dict[str, str], marker: str, result: LatencyResult
) -> float | None:
    """Seconds until search returns `marker` (None if the route rejects our request)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    while loop.time() - start < 120:
        resp = await running.client.post(
            "/v1/search", json={"query": marker, "limit": 10}, headers=headers
        )
        if resp.status_code != 200:
            result.search = f"`POST /v1/search` wired but answered {resp.status_code}: skipped"
            return None
        if marker in resp.text:
            return loop.time() - start
        await asyncio.sleep(POLL_S)
    raise TimeoutError("search never returned the edited text")


async def _evicted(running: InProcessApp, note_id: ObjectId, version: int) -> bool:
    """The reconciler has finished with `version`: older versions are deleted, which it
    does after moving their vectors to the embedding cache."""
    others = {"note_id": note_id, "note_version": {"$ne": version}}
    return await running.container.db.note_chunks.count_documents(others) == 0


async def _full_index(
    running: InProcessApp, title: str, content: str, n_chunks: int, result: LatencyResult
) -> None:
    headers = await running.new_user("fresh-author")
    await running.container.db.embedding_cache.delete_many({})
    resp = await running.client.post(
        "/v1/notes", json={"title": title, "content_md": content}, headers=headers
    )
    start = time.perf_counter()
    resp.raise_for_status()
    oid = ObjectId(resp.json()["id"])
    hashes = {c.content_hash for c in running.container.chunker.chunk_note(content, title)}
    await wait_until(
        lambda: _visible(running, oid, 1, hashes),
        timeout_s=900,
        interval_s=POLL_S,
        what="full index",
    )
    result.full_s.append(time.perf_counter() - start)
    note = await running.container.db.notes.find_one({"_id": oid})
    stats = note["last_index_stats"]
    if stats["embedded"] != len(hashes) or stats["chunks"] != n_chunks:
        raise RuntimeError(f"baseline was not a full re-embed: {stats}")
    result.full_embedded.append(stats["embedded"])


async def run_edit_latency(
    settings: Settings, edits: int, fulls: int, lines: int = 1000
) -> LatencyResult:
    """(b) with the app's background workers; `fulls` baselines interleaved with the edits,
    on a `lines`-line realistic note."""
    result = LatencyResult()
    title = "Chunking benchmark note"
    content = realistic_note(lines)
    async with in_process_app(settings) as running:
        headers = await running.new_user()
        chunker = running.container.chunker
        wired = search_route(running.app)
        resp = await running.client.post(
            "/v1/notes", json={"title": title, "content_md": content}, headers=headers
        )
        resp.raise_for_status()
        oid = ObjectId(resp.json()["id"])
        first = chunker.chunk_note(content, title)
        old = {c.content_hash for c in first}
        result.lines, result.note_bytes, result.chunks = lines, len(content.encode()), len(first)
        await wait_until(
            lambda: _visible(running, oid, 1, old),
            timeout_s=900,
            interval_s=0.05,
            what="initial index",
        )
        full_at = {round(i * edits / fulls) for i in range(fulls)}
        version = 1
        if wired:
            result.search = "included (search polled after the chunk was visible)"
        rng = random.Random(4)
        for i in range(edits):
            if i in full_at:
                # Clearing the cache while the last edit's eviction is still writing to it
                # would let the baseline reuse vectors: wait for the eviction first.
                await wait_until(
                    lambda v=version: _evicted(running, oid, v),
                    timeout_s=300,
                    interval_s=0.05,
                    what="eviction",
                )
                await _full_index(running, title, content, len(old), result)
            marker = f"zqx{i}marker"
            content = rewrite_paragraph(content, 7 * i + 3, f"{marker} {paragraph(rng)}")
            new = {c.content_hash for c in chunker.chunk_note(content, title)}
            resp = await running.client.patch(
                f"/v1/notes/{oid}", json={"content_md": content}, headers=headers
            )
            start = time.perf_counter()
            resp.raise_for_status()
            version = resp.json()["version"]
            await wait_until(
                lambda v=version, h=new - old: _visible(running, oid, v, h),
                timeout_s=300,
                interval_s=POLL_S,
                what="edit indexed",
            )
            result.edit_s.append(time.perf_counter() - start)
            if wired and result.search.startswith("included"):
                waited = await _searchable(running, headers, marker, result)
                if waited is not None:
                    result.search_s.append(result.edit_s[-1] + waited)
            note = await running.container.db.notes.find_one({"_id": oid})
            result.edit_embedded.append(note["last_index_stats"]["embedded"])
            result.edit_index_ms.append(note["last_index_stats"]["duration_ms"])
            old = new
    return result


# -- (c) throughput ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ThroughputRow:
    """(c): one worker configuration draining the same fresh notes."""

    config: str
    notes: int
    chunks: int
    embedded: int  # chunks actually embedded (the rest reused an identical text's vector)
    tokens: int
    seconds: float

    @property
    def notes_per_s(self) -> float:
        return self.notes / self.seconds

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.seconds


def throughput_notes(n: int) -> list[tuple[str, str]]:
    """`n` distinct small realistic notes (title, markdown): 3 sections of one block."""
    out = []
    for i in range(n):
        note = generate_note(3, seed=50_000 + i, blocks=(1, 1))
        out.append((f"{note.title} ({i})", note.render()))
    return out


def _worker_process(settings: Settings, log_path: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "MONGODB_URL": str(settings.mongodb_url),
        "MONGODB_DB": settings.mongodb_db,
        "EMBEDDING_PROVIDER": "local",
        "AUTONOTE_INDEX_POLL_S": "0.05",
        "LOG_LEVEL": "INFO",
        "LOG_JSON": "true",
    }
    env.pop("OPENAI_API_KEY", None)
    with log_path.open("ab") as logf:
        return subprocess.Popen(
            [sys.executable, "-m", "api.cli", "worker", "--concurrency", "1"],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
        )


async def _all_indexed(db: Any, n: int) -> bool:
    return await db.notes.count_documents({"index_status": "indexed"}) >= n


async def run_throughput(
    settings: Settings, config: str, notes: list[tuple[str, str]], work_dir: Path
) -> ThroughputRow:
    """Queue `notes` (parked), start the workers of `config`, release, time the drain.

    `config`: "1 loop", "2 loops" (in this process, sharing the app's embedder) or
    "2 processes" (`autonote worker --concurrency 1` twice, each with its own model)."""
    async with in_process_app(settings) as running:  # settings: no in-process workers
        db = running.container.db
        headers = await running.new_user()
        for title, content in notes:
            resp = await running.client.post(
                "/v1/notes", json={"title": title, "content_md": content}, headers=headers
            )
            resp.raise_for_status()
        later = datetime.now(UTC) + timedelta(days=1)
        await db.notes.update_many({}, {"$set": {"next_attempt_at": later}})
        procs: list[subprocess.Popen[bytes]] = []
        workers: IndexWorkers | None = None
        try:
            if config == "2 processes":
                logs = [work_dir / f"worker-{i}.log" for i in range(2)]
                procs = [_worker_process(settings, p) for p in logs]
                await wait_until(
                    lambda: _ready(logs, procs),
                    timeout_s=120,
                    interval_s=0.1,
                    what="worker processes ready",
                )
            else:
                running.container.embedder.load()  # the processes load theirs inside the clock
                workers = IndexWorkers(
                    running.container.indexing.reconciler,
                    concurrency=1 if config == "1 loop" else 2,
                    poll_s=0.05,
                    stop_grace_s=running.container.settings.autonote_index_stop_grace_s,
                )
                await workers.start()
            start = time.perf_counter()
            await db.notes.update_many({}, {"$set": {"next_attempt_at": datetime.now(UTC)}})
            if workers is not None:
                workers.wake()
            await wait_until(
                lambda: _all_indexed(db, len(notes)),
                timeout_s=1800,
                interval_s=0.05,
                what=f"throughput {config}",
            )
            seconds = time.perf_counter() - start
        finally:
            if workers is not None:
                await workers.stop()
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(30)
        docs = await db.notes.find({}, {"chunk_count": 1, "last_index_stats": 1}).to_list()
        chunks = sum(d["chunk_count"] for d in docs)
        tokens = sum(d["last_index_stats"]["tokens_embedded"] for d in docs)
        embedded = sum(d["last_index_stats"]["embedded"] for d in docs)
    return ThroughputRow(config, len(notes), chunks, embedded, tokens, seconds)


async def _ready(logs: list[Path], procs: list[subprocess.Popen[bytes]]) -> bool:
    for log_path, proc in zip(logs, procs, strict=True):
        if proc.poll() is not None:
            raise RuntimeError(f"worker exited: {log_path.read_text(errors='replace')[-1500:]}")
    return all(
        p.exists() and "index.workers_started" in p.read_text(errors="replace") for p in logs
    )
