"""The checker on a few thousand chunks: it streams (bounded memory), it is fast enough to
run on a live database, and the merge of the two cursors puts every orphan where it
belongs (before the first note, between notes, after the last one)."""

from __future__ import annotations

import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from bson import ObjectId
from pymongo import AsyncMongoClient

from api.chunk_store.vectors import to_bson_vector
from api.chunking import get_chunker
from api.db.client import ensure_indexes
from api.integrity import Expectations, IntegrityChecker
from connectors.embeddings.local import LocalEmbedder
from tests.helpers import sectioned_note

NOTES = 250
MODEL = f"{LocalEmbedder.model}@{LocalEmbedder.dimensions}"
EXPECT = Expectations(MODEL, LocalEmbedder.dimensions)


async def seed(db: Any) -> tuple[list[ObjectId], int]:
    """NOTES consistent indexed notes with their chunks (random unit vectors: the checker
    never compares a vector with its text)."""
    chunker = get_chunker(
        "hierarchical_markdown",
        max_chunk_tokens=120,
        min_chunk_tokens=20,
        tokenizer=LocalEmbedder().tokenizer,
        max_input_tokens=LocalEmbedder.max_input_tokens,
    )
    rng = np.random.default_rng(0)
    author = ObjectId()
    now = datetime.now(UTC)
    notes, chunks, ids = [], [], []
    # 20 distinct texts (chunking is not what is measured here), each in 20 notes.
    texts = [sectioned_note(8, seed=i, words=45) for i in range(20)]
    chunked = [chunker.chunk_note(t, "Note") for t in texts]
    for i in range(NOTES):
        note_id = ObjectId()
        ids.append(note_id)
        content, parts = texts[i % 20], chunked[i % 20]
        notes.append(
            {
                "_id": note_id,
                "author_id": author,
                "title": f"Note {i}",
                "content_md": content,
                "status": "active",
                "version": 3,
                "indexed_version": 3,
                "index_status": "indexed",
                "chunk_count": len(parts),
                "embedding_model": MODEL,
                "created_at": now,
                "chunking_strategy": chunker.strategy,
                "chunking_version": chunker.version,
            }
        )
        vectors = rng.standard_normal((len(parts), EXPECT.dimensions), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        for c, v in zip(parts, vectors, strict=True):
            chunks.append(
                {
                    "note_id": note_id,
                    "author_id": author,
                    "note_version": 3,
                    "chunk_index": c.chunk_index,
                    "chunk_type": c.chunk_type,
                    "content_md": c.content_md,
                    "start_offset": c.start_offset,
                    "end_offset": c.end_offset,
                    "content_hash": c.content_hash,
                    "metadata": c.metadata,
                    "embedding": to_bson_vector(v),
                    "embedding_model": MODEL,
                }
            )
    await ensure_indexes(db)
    await db.notes.insert_many(notes)
    for start in range(0, len(chunks), 1000):
        await db.note_chunks.insert_many(chunks[start : start + 1000])
    return ids, len(chunks)


async def test_thousands_of_chunks_streamed(mongo_url: str, db_name: str) -> None:
    client: AsyncMongoClient = AsyncMongoClient(mongo_url, tz_aware=True)
    db = client[db_name]
    try:
        t0 = time.perf_counter()
        ids, total = await seed(db)
        print(f"\nseeded {total} chunks in {time.perf_counter() - t0:.1f}s")
        assert total >= 2000, total
        data_bytes = (await db.command("collStats", "note_chunks")).get("size") or total * 2000

        tracemalloc.start()
        started = time.perf_counter()
        report = await IntegrityChecker(db, EXPECT, batch_size=20, settle_s=0).run()
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert report.ok and report.findings == []
        assert (report.notes_scanned, report.chunks_scanned) == (NOTES, total)
        print(
            f"\ncheck: {total} chunks / {NOTES} notes in {elapsed:.2f}s, "
            f"peak traced memory {peak / 2**20:.1f} MiB for {data_bytes / 2**20:.1f} MiB of chunks"
        )
        assert peak < data_bytes / 2, "the scan must stream, not load the collections"

        # Orphans at every position of the merge, plus two broken notes in the middle.
        first = ObjectId.from_datetime(datetime(2000, 1, 1, tzinfo=UTC))
        middle = ObjectId.from_datetime(ids[NOTES // 2].generation_time)  # sorts among notes
        last = ObjectId.from_datetime(datetime.now(UTC) + timedelta(days=1))
        sample = await db.note_chunks.find_one({"note_id": ids[0]})
        await db.note_chunks.insert_many(
            [{**sample, "_id": ObjectId(), "note_id": n} for n in (first, middle, last)]
        )
        await db.notes.update_one({"_id": ids[10]}, {"$set": {"chunk_count": 0}})
        await db.note_chunks.update_one({"note_id": ids[200]}, {"$set": {"author_id": ObjectId()}})
        report = await IntegrityChecker(db, EXPECT, batch_size=50, settle_s=0).run()
        kinds = sorted((f.kind, f.note_id) for f in report.findings)
        assert kinds == sorted(
            [
                ("orphan_chunks", first),
                ("orphan_chunks", middle),
                ("orphan_chunks", last),
                ("chunk_count", ids[10]),
                ("author_mismatch", ids[200]),
            ]
        )
        assert report.notes_scanned == NOTES and report.suspects == 5
    finally:
        await client.drop_database(db_name)
        await client.close()
