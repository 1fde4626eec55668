"""Search latency and index memory of the local backend at 10 000 and 100 000 chunks.

Data: the REAL chunks of the retrieval dataset (text, offsets, breadcrumbs and the vectors
the reconciler stored), replicated under fresh note ids until the target count is reached,
all for ONE user (the worst case: search scans one author's partition). Each replica's
vectors get a little Gaussian noise (σ = 0.02, re-normalised) so no two rows are equal;
texts are copied into distinct string objects so memory is what distinct chunks cost.
The replicated notes are also written to `notes` (search re-checks every candidate note
there), so the timed path is the production one.

Replication is pessimistic for the keyword side: every word of the corpus recurs in every
replica, so posting lists are ~N/680 times longer than the dataset's and FTS5 scores every
matching row; a real 100k-chunk corpus has a far larger vocabulary with shorter lists.

Timed: `RetrievalService.search(author, question, limit=6, chunks_per_note=3)` (what chat
asks), end to end: query embedding with the local model (no cache hit: each question is
asked once per size, on a fresh service), vector + BM25 retrieval, fusion, the `notes`
re-check on the embedded database, grouping. Baseline in the same run, on the same
questions: *serial* search, the same service with the query embedding awaited before
retrieval starts (BM25 not overlapped with the embedding). Also timed alone:
the query embedding and the index lookups (`LocalIndex.search_hybrid` with one
retriever at a time) with a precomputed vector, and the `notes` re-check query.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psutil
import structlog
from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from api.notes.repository import NotesSearchQueries
from api.retrieval.backends import LocalBackend, resolved_vector
from api.retrieval.local.index import LocalIndex
from api.retrieval.service import RankingConfig, RetrievalService
from api.retrieval.types import ChunkRecord, NoteMeta
from benchmarks.service_harness import LatencySummary, summarize

log = structlog.get_logger(__name__)

NOISE = 0.02
BATCH_NOTES = 500


@dataclass(frozen=True, slots=True)
class LatencyResult:
    """Latency and memory at one index size."""

    chunks: int
    notes: int
    search: LatencySummary  # end to end, query embedding included (wall clock)
    search_cpu: LatencySummary  # this process's CPU time per search (all its threads)
    serial: LatencySummary  # baseline: embedding awaited before retrieval (wall clock)
    embed: LatencySummary  # query embedding alone
    vector: LatencySummary  # the vector scan alone (k=72, as search asks)
    vector_cpu: LatencySummary
    keyword: LatencySummary  # BM25 alone (FTS5, k=72)
    keyword_cpu: LatencySummary
    recheck: LatencySummary  # the `notes` re-check of 6 candidate notes (database)
    recheck_all: LatencySummary  # baseline: re-checking every candidate note instead
    candidates: float  # mean candidate notes per question (vector + keyword top-72)
    memory_bytes: int  # LocalIndex.memory_bytes()
    rss_delta_bytes: int  # process RSS growth while building the index
    build_s: float
    load_avg: float  # 1-minute load average when the timing finished


def _copy(text: str) -> str:
    # A new string object (slicing or str() would return the same one).
    return text.encode("utf-8").decode("utf-8")


def replicate(
    base: list[ChunkRecord], notes: dict[str, dict[str, Any]], target: int, author: str, seed: int
) -> tuple[list[tuple[NoteMeta, int, list[ChunkRecord]]], list[dict[str, Any]]]:
    """Whole-note copies of `base` (grouped by note) until at least `target` chunks."""
    rng = np.random.default_rng(seed)
    by_note: dict[str, list[ChunkRecord]] = {}
    for c in base:
        by_note.setdefault(c.note_id, []).append(c)
    items: list[tuple[NoteMeta, int, list[ChunkRecord]]] = []
    docs: list[dict[str, Any]] = []
    now = datetime.now(UTC)
    total = 0
    while total < target:
        for note_id, chunks in by_note.items():
            if total >= target:
                break
            oid = ObjectId()
            src = notes[note_id]
            meta = NoteMeta(
                note_id=str(oid),
                author_id=author,
                title=_copy(src["title"]),
                tags=list(src.get("tags") or []),
                updated_at=now,
                indexed_version=1,
            )
            vectors = np.stack([c.vector for c in chunks]).astype(np.float32)
            vectors += rng.normal(0.0, NOISE, vectors.shape).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            copies = [
                ChunkRecord(
                    chunk_id=str(ObjectId()),
                    note_id=str(oid),
                    author_id=author,
                    note_version=1,
                    chunk_index=c.chunk_index,
                    heading_path=[_copy(h) for h in c.heading_path],
                    section_path=_copy(c.section_path),
                    content_md=_copy(c.content_md),
                    start_offset=c.start_offset,
                    end_offset=c.end_offset,
                    tags=list(c.tags),
                    chunk_type=c.chunk_type,
                    embedding_text="",
                    vector=vectors[i],
                )
                for i, c in enumerate(chunks)
            ]
            items.append((meta, 1, copies))
            docs.append(
                {
                    "_id": oid,
                    "author_id": ObjectId(author),
                    "title": src["title"],
                    "content_md": src["content_md"],
                    "tags": list(src.get("tags") or []),
                    "status": "active",
                    "version": 1,
                    "indexed_version": 1,
                    "index_status": "indexed",
                    "created_at": now,
                    "updated_at": now,
                    "chunk_count": len(copies),
                }
            )
            total += len(copies)
    return items, docs


class SerialBackend:
    """The baseline: waits for the query embedding, then retrieves."""

    def __init__(self, inner: LocalBackend) -> None:
        self.inner = inner
        self.name = inner.name

    async def retrieve(self, author_id: ObjectId, *, vector: Any, **kw: Any) -> Any:
        return await self.inner.retrieve(author_id, vector=await resolved_vector(vector), **kw)


def _vector_only(index: LocalIndex, author: str, vec: np.ndarray, k: int) -> Any:
    return index.search_hybrid(author, vec, None, k_vector=k, k_keyword=0)[0]


def _keyword_only(index: LocalIndex, author: str, query: str, k: int) -> Any:
    return index.search_hybrid(author, None, query, k_vector=0, k_keyword=k)[1]


def _rss() -> int:
    gc.collect()
    return int(psutil.Process().memory_info().rss)


async def measure_size(
    db: AsyncDatabase,
    embedder: Any,
    base: list[ChunkRecord],
    base_notes: dict[str, dict[str, Any]],
    queries: list[str],
    target: int,
    *,
    ranking: RankingConfig | None = None,
) -> LatencyResult:
    """Build a `target`-chunk index for a new user and time `queries` against it."""
    author = ObjectId()
    items, docs = replicate(base, base_notes, target, str(author), seed=target)
    for start in range(0, len(docs), 1000):
        await db.notes.insert_many(docs[start : start + 1000])
    index = LocalIndex(embedder.dimensions)
    try:
        before = _rss()
        started = time.perf_counter()
        for start in range(0, len(items), BATCH_NOTES):
            index.replace_notes(items[start : start + BATCH_NOTES])
        build_s = time.perf_counter() - started
        del items
        rss_delta = _rss() - before
        service = RetrievalService(
            LocalBackend(index), embedder, NotesSearchQueries(db), ranking=ranking
        )
        serial = RetrievalService(
            SerialBackend(LocalBackend(index)), embedder, NotesSearchQueries(db), ranking=ranking
        )
        for q in queries[:5]:  # warm-up: model session, SQLite pages, driver pool
            await embedder.embed([f"warm up {q}"], truncate=True)
        gc.collect()
        wall: dict[str, list[float]] = {
            n: [] for n in ("search", "serial", "embed", "vec", "kw", "meta", "meta_all")
        }
        candidates: list[int] = []
        cpu: dict[str, list[float]] = {n: [] for n in ("search", "vec", "kw")}
        metas = NotesSearchQueries(db)

        async def timed(name: str, work: Awaitable[Any]) -> Any:
            c0, t0 = time.process_time(), time.perf_counter()
            out = await work
            wall[name].append(time.perf_counter() - t0)
            if name in cpu:
                cpu[name].append(time.process_time() - c0)
            return out

        async def call(fn: Any, *args: Any) -> Any:
            return fn(*args)

        for i, q in enumerate(queries):
            # Alternate which goes first so neither always finds the other's warm pages.
            pair = [("search", service), ("serial", serial)][:: 1 if i % 2 == 0 else -1]
            for name, svc in pair:
                found = await timed(name, svc.search(author, q, limit=6, chunks_per_note=3))
                if name == "search":
                    out = found
            # A different text, so the embedder does the work again (no cache hit).
            batch = await timed("embed", embedder.embed([q + " ?"], truncate=True))
            vec = np.asarray(batch.vectors[0], dtype=np.float32)
            v = await timed("vec", call(_vector_only, index, str(author), vec, 72))
            k = await timed("kw", call(_keyword_only, index, str(author), q, 72))
            ids = [ObjectId(r.note_id) for r in out.results]
            await timed("meta", metas.active_metas(author, ids))
            every = list(dict.fromkeys(ObjectId(c.note_id) for c, _ in v + k))
            candidates.append(len(every))
            await timed("meta_all", metas.active_metas(author, every))
        stats = index.stats()
        result = LatencyResult(
            chunks=stats.chunks,
            notes=stats.notes,
            search=summarize(wall["search"]),
            search_cpu=summarize(cpu["search"]),
            serial=summarize(wall["serial"]),
            embed=summarize(wall["embed"]),
            vector=summarize(wall["vec"]),
            vector_cpu=summarize(cpu["vec"]),
            keyword=summarize(wall["kw"]),
            keyword_cpu=summarize(cpu["kw"]),
            recheck=summarize(wall["meta"]),
            recheck_all=summarize(wall["meta_all"]),
            candidates=sum(candidates) / max(len(candidates), 1),
            memory_bytes=index.memory_bytes(),
            rss_delta_bytes=rss_delta,
            build_s=build_s,
            load_avg=os.getloadavg()[0],
        )
        log.info("bench.retrieval_latency", chunks=result.chunks, p95_ms=result.search.p95)
        return result
    finally:
        index.close()
        await db.notes.delete_many({"author_id": author})
