"""Helpers for the migration tests: legacy documents as the existing Autonote system leaves
them, database snapshots, and running the migration in-process or as the real CLI."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from api.config import Settings
from api.migration.execute import MigrateOptions, ProgressMode, execute
from api.providers import build_chunker, build_embedder, build_openai_client

ROOT = Path(__file__).resolve().parents[2]
LEGACY_FIELDS = {
    "_id",
    "title",
    "content_md",
    "author_id",
    "tags",
    "status",
    "created_at",
    "version",
}
WORDS = (
    "kernel cache index shard vector query backup restore latency budget replica lease "
    "garden tomato basil harvest compost bread flour oven travel kyoto train museum"
).split()
BASE_TIME = datetime(2024, 1, 1, tzinfo=UTC)


def legacy_note(i: int, author: ObjectId, *, rng: random.Random) -> dict[str, Any]:
    """A note as the legacy system stored it: 1-3 short sections, `version` on some, no
    index field at all. Created one hour apart from BASE_TIME (for --since)."""
    sections = rng.choice((1, 1, 2, 3))
    body = "\n\n".join(
        f"## Part {j}\n\n{' '.join(rng.choice(WORDS) for _ in range(6))} {i}."
        for j in range(sections)
    )
    doc: dict[str, Any] = {
        "title": f"Legacy note {i}",
        "content_md": body,
        "author_id": author,
        "tags": [rng.choice(WORDS)],
        "status": "active",
        "created_at": BASE_TIME + timedelta(hours=i),
    }
    if i % 3 == 0:
        doc["version"] = 1 + i % 4
    return doc


async def insert_legacy(
    db: AsyncDatabase, n: int, authors: list[ObjectId], *, seed: int = 0, start: int = 0
) -> list[ObjectId]:
    """Insert `n` legacy notes round-robin over `authors`; return their ids in order."""
    rng = random.Random(seed)
    docs = [legacy_note(start + i, authors[i % len(authors)], rng=rng) for i in range(n)]
    result = await db.notes.insert_many(docs)
    return list(result.inserted_ids)


async def snapshot(db: AsyncDatabase) -> dict[str, Any]:
    """Every collection's documents and indexes (to prove a dry run changed nothing)."""
    out: dict[str, Any] = {}
    for name in sorted(await db.list_collection_names()):
        docs = await db[name].find({}).sort("_id", 1).to_list()
        indexes = sorted([str(ix) async for ix in await db[name].list_indexes()])
        out[name] = {"docs": docs, "indexes": indexes}
    return out


async def reserved_now(db: AsyncDatabase) -> int:
    """Notes a migration holds a live reservation on (`api.indexing.queue`)."""
    return await db.notes.count_documents({"reserved_until": {"$gt": datetime.now(UTC)}})


async def waiting_and_unreserved(db: AsyncDatabase, ids: list[ObjectId]) -> tuple[int, int]:
    """In one read, of `ids`: how many wait to be indexed (pending or indexing), and how
    many of those hold no live reservation."""
    now = datetime.now(UTC)
    waiting = {"$in": ["$index_status", ["pending", "indexing"]]}
    unreserved = {"$and": [waiting, {"$not": [{"$gt": ["$reserved_until", now]}]}]}
    rows = await (
        await db.notes.aggregate(
            [
                {"$match": {"_id": {"$in": ids}}},
                {
                    "$group": {
                        "_id": None,
                        "waiting": {"$sum": {"$cond": [waiting, 1, 0]}},
                        "unreserved": {"$sum": {"$cond": [unreserved, 1, 0]}},
                    }
                },
            ]
        )
    ).to_list()
    return (rows[0]["waiting"], rows[0]["unreserved"]) if rows else (0, 0)


def chunker_for(settings: Settings) -> Any:
    """The real chunker the migration builds from these settings (sized for the configured
    embedder's tokenizer; building an OpenAI client makes no request)."""
    return build_chunker(settings, build_embedder(settings, build_openai_client(settings)))


async def run_in_process(settings: Settings, **options: Any) -> tuple[int, dict[str, Any]]:
    """`execute` with --json; returns (exit code, parsed JSON result)."""
    out = io.StringIO()
    opts = MigrateOptions(progress=ProgressMode.none, json_output=True, **options)
    code = await execute(settings, opts, stdout=out)
    text = out.getvalue().strip()
    return code, (json.loads(text.splitlines()[-1]) if text else {})


def cli_env(settings: Settings, **extra: str) -> dict[str, str]:
    """Environment for the CLI subprocess: the test's database, the local embedder."""
    env = {
        **os.environ,
        "MONGODB_URL": str(settings.mongodb_url),
        "MONGODB_DB": settings.mongodb_db,
        "EMBEDDING_PROVIDER": "local",
        "LOG_LEVEL": "INFO",
        "LOG_JSON": "true",
        "AUTONOTE_DATA_DIR": str(settings.autonote_data_dir),
        **extra,
    }
    env.pop("OPENAI_API_KEY", None)
    env.pop("OPENAI_BASE_URL", None)
    return env


def start_cli(
    settings: Settings, *args: str, stderr: Any = subprocess.DEVNULL, **env: str
) -> subprocess.Popen[bytes]:
    """`python -m scripts.migrate_notes_to_chunks ARGS` as a child process."""
    return subprocess.Popen(
        [sys.executable, "-m", "scripts.migrate_notes_to_chunks", *args],
        cwd=ROOT,
        env=cli_env(settings, **env),
        stdout=subprocess.PIPE,
        stderr=stderr,
    )


async def check_all_indexed(db: AsyncDatabase, chunker: Any, note_ids: list[ObjectId]) -> int:
    """Every note indexed at its current version with exactly the chunker's chunks for its
    current content; no duplicate (note_id, note_version, chunk_index); no stray chunks.
    Returns the number of chunks."""
    notes = await db.notes.find({"_id": {"$in": note_ids}}).to_list()
    assert len(notes) == len(note_ids)
    by_note: dict[ObjectId, list[dict[str, Any]]] = {}
    chunk_docs = db.note_chunks.find({"note_id": {"$in": note_ids}}, {"embedding": 0})
    async for doc in chunk_docs.sort([("note_id", 1), ("chunk_index", 1)]):
        by_note.setdefault(doc["note_id"], []).append(doc)
    total = 0
    for n in notes:
        assert n["index_status"] == "indexed", (n["_id"], n["index_status"], n.get("index_error"))
        assert n["indexed_version"] == n["version"]
        docs = by_note.get(n["_id"], [])
        want = chunker.chunk_note(n["content_md"], n["title"])
        assert [d["content_hash"] for d in docs] == [c.content_hash for c in want]
        assert {d["note_version"] for d in docs} <= {n["version"]}
        assert n["chunk_count"] == len(want)
        assert n["chunking_version"] == chunker.version
        total += len(want)
    cursor = await db.note_chunks.aggregate(
        [
            {"$group": {"_id": ["$note_id", "$note_version", "$chunk_index"], "n": {"$sum": 1}}},
            {"$match": {"n": {"$gt": 1}}},
        ]
    )
    assert await cursor.to_list() == [], "duplicate chunks"
    return total
