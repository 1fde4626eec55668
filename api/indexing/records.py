"""What the reconciler writes, built without I/O: chunk documents, index fields, stats and
the retry back-off. Kept apart from the reconciler so each rule is tested directly."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime
from typing import Any

from api.chunk_store.generations import generation_of
from api.chunking import MarkdownChunk
from api.db.ids import new_object_id
from api.indexing.types import IndexStats, Progress
from api.notes.stored import note_tags, note_updated_at
from api.schemas import TAG_MAX_CHARS


def backoff_seconds(
    attempt: int, base: float, cap: float, rng: random.Random | None = None
) -> float:
    """Exponential backoff with "equal jitter": half fixed, half random, capped."""
    ceiling = min(cap, base * (2 ** max(0, attempt - 1)))
    return ceiling / 2 + (rng or random).uniform(0, ceiling / 2)


def chunk_tags(note: dict[str, Any]) -> list[str]:
    """The note's tags as its chunks carry them, for search filters. A tag longer than any
    filter tag can be never matches one, so it is left out (else a legacy note's huge tag is
    copied into every chunk)."""
    return [t for t in note_tags(note) if len(t) <= TAG_MAX_CHARS]


def chunk_document(
    note: dict[str, Any],
    version: int,
    chunk: MarkdownChunk,
    vector: Any,
    *,
    model_key: str,
    now: datetime,
    generation: str | None = None,
) -> dict[str, Any]:
    """One `note_chunks` document: the chunk, its note's owner and tags (denormalised so
    search filters need no join), and the embedding with the model that made it and the
    generation (chunker and model) it belongs to (None: left to the start-up backfill,
    which takes it from the note's `chunking_version`)."""
    doc = {
        "_id": new_object_id(),
        "note_id": note["_id"],
        "author_id": note["author_id"],
        "tags": chunk_tags(note),
        "note_updated_at": note_updated_at(note),
        "note_version": version,
        "chunk_index": chunk.chunk_index,
        "total_chunks": chunk.total_chunks,
        "chunk_position": chunk.chunk_position,
        "heading_path": list(chunk.heading_path),
        "section_index": chunk.section_index,
        "section_path": chunk.section_path,
        "chunk_type": chunk.chunk_type,
        "content_md": chunk.content_md,
        "start_offset": chunk.start_offset,
        "end_offset": chunk.end_offset,
        "token_count": chunk.token_count,
        "content_hash": chunk.content_hash,
        "metadata": dict(chunk.metadata or {}),
        "embedding": vector,
        "embedding_model": model_key,
        "created_at": now,
    }
    if generation is not None:
        doc["generation"] = generation
    return doc


def index_stats(
    chunks: int,
    embedded: int,
    tokens: int,
    started: float,
    carried: Progress | None = None,
) -> IndexStats:
    """The run's stats: chunks not embedded were reused; `started` is a
    `time.perf_counter()` reading. `carried`: the work of runs that handed the note over
    before this one completed it (their vectors come back here from the cache, but they
    were embedded for this note, not reused)."""
    carried = carried or Progress()
    embedded += carried.embedded
    return IndexStats(
        chunks=chunks,
        embedded=embedded,
        reused=max(0, chunks - embedded),
        tokens_embedded=tokens + carried.tokens,
        duration_ms=round((time.perf_counter() - started) * 1000 + carried.ms, 2),
    )


def index_fields(
    version: int | None,
    chunk_count: int,
    stats: IndexStats,
    *,
    strategy: str,
    chunking_version: str,
    model_key: str,
) -> dict[str, Any]:
    """The note fields an index run sets with its commit (`version` None: nothing indexed,
    as for a trashed note)."""
    return {
        "generation": generation_of(chunking_version, model_key),
        "indexed_version": version,
        "chunk_count": chunk_count,
        "chunking_strategy": strategy,
        "chunking_version": chunking_version,
        "embedding_model": model_key,
        "last_chunked_at": datetime.now(UTC),
        "last_index_stats": stats.as_document(),
        "index_progress": None,  # handed-over runs' work, now in `stats`
    }
