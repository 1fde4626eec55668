"""Small factories for retrieval tests (chunks, notes, hits, unit vectors)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from api.retrieval.types import ChunkHit, ChunkRecord, NoteMeta

DIM = 16
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def random_unit(rng: np.random.Generator, dim: int = DIM) -> np.ndarray:
    return unit(rng.standard_normal(dim))


def note(
    note_id: str,
    author_id: str = "alice",
    *,
    tags: list[str] | None = None,
    title: str | None = None,
    days: int = 0,
) -> NoteMeta:
    return NoteMeta(
        note_id=note_id,
        author_id=author_id,
        title=title or f"Note {note_id}",
        tags=list(tags or []),
        updated_at=T0 + timedelta(days=days),
    )


def chunk(
    meta: NoteMeta,
    index: int,
    vector: np.ndarray,
    *,
    version: int = 1,
    text: str | None = None,
    heading: list[str] | None = None,
    start: int | None = None,
) -> ChunkRecord:
    content = text if text is not None else f"chunk {index} of {meta.note_id}"
    heading_path = heading if heading is not None else [meta.title, f"Section {index}"]
    begin = start if start is not None else index * 1000
    return ChunkRecord(
        chunk_id=f"{meta.note_id}:v{version}:{index}",
        note_id=meta.note_id,
        author_id=meta.author_id,
        note_version=version,
        chunk_index=index,
        heading_path=heading_path,
        section_path=" > ".join(heading_path),
        content_md=content,
        start_offset=begin,
        end_offset=begin + len(content),
        tags=list(meta.tags),
        chunk_type="text",
        embedding_text=" > ".join(heading_path) + "\n\n" + content,
        vector=unit(vector),
    )


def hit(
    note_id: str,
    index: int,
    score: float,
    *,
    author_id: str = "alice",
    heading: list[str] | None = None,
    start: int = 0,
    text: str = "",
    version: int = 1,
    section: int | None = None,
    end: int | None = None,
) -> ChunkHit:
    """A hit whose chunk spans `start` to `end` (default: the length of its text)."""
    heading_path = heading if heading is not None else ["T", f"S{index}"]
    content = text or f"text {note_id}/{index}"
    return ChunkHit(
        chunk_id=f"{note_id}:{index}",
        note_id=note_id,
        author_id=author_id,
        note_version=version,
        chunk_index=index,
        heading_path=heading_path,
        section_path=" > ".join(heading_path),
        content_md=content,
        start_offset=start,
        end_offset=start + len(content) if end is None else end,
        score=score,
        section_index=section,
    )
