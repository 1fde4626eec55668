"""One author's share of the local index, and helpers to prepare and size its contents.

`LocalIndex` owns the locking protocol; a `Partition` groups what one author's searches
touch: the vector store, the full-text table, the filter index and the note entries.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from api.retrieval.local.filters import NoteFilterIndex
from api.retrieval.local.fulltext import FullTextIndex
from api.retrieval.local.vectors import VectorStore
from api.retrieval.types import ChunkData, NoteMeta, SearchFilters


@dataclass(slots=True)
class NoteEntry:
    """What the index knows about one held note."""

    meta: NoteMeta
    version: int
    ord: int
    chunk_count: int
    nbytes: int


@dataclass(slots=True)
class PreparedNote:
    """A validated note update, ready to be swapped in."""

    meta: NoteMeta
    version: int
    data: list[ChunkData]
    vectors: np.ndarray


@dataclass(slots=True)
class Partition:
    """One author's share of the index."""

    vectors: VectorStore
    fulltext: FullTextIndex
    filters: NoteFilterIndex = field(default_factory=NoteFilterIndex)
    lock: threading.Lock = field(default_factory=threading.Lock)
    notes: dict[str, NoteEntry] = field(default_factory=dict)
    next_ord: int = 0

    def note_mask(self, filters: SearchFilters | None) -> np.ndarray | None:
        """Boolean mask over this author's note ordinals passing `filters`; None when
        nothing is filtered. Call under `lock`."""
        if filters is None or filters.is_empty:
            return None
        note_ords = None
        if filters.note_ids is not None:
            entries = (self.notes.get(n) for n in set(filters.note_ids))
            note_ords = [e.ord for e in entries if e is not None]
        return self.filters.mask(filters, note_ords)

    def allowed_list(self, mask: np.ndarray | None) -> list[int] | None:
        """The ordinals a mask allows (for SQL), or None when it allows every note."""
        if mask is None:
            return None
        allowed = np.flatnonzero(mask)
        if len(allowed) == len(self.notes):
            return None
        return allowed.tolist()


def unit_rows(vectors: Sequence[np.ndarray], dim: int) -> np.ndarray:
    """Stack vectors into a float32 matrix with L2-normalised rows (zero rows stay zero)."""
    if not vectors:
        return np.empty((0, dim), dtype=np.float32)
    matrix = np.stack([np.asarray(v, dtype=np.float32) for v in vectors])
    if not np.isfinite(matrix).all():
        raise ValueError("vectors must be finite")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def _str_list_bytes(values: list[str]) -> int:
    return sys.getsizeof(values) + sum(sys.getsizeof(v) for v in values)


def chunk_bytes(chunk: ChunkData) -> int:
    """Approximate bytes of a stored chunk (object, strings, lists)."""
    return (
        sys.getsizeof(chunk)
        + sys.getsizeof(chunk.chunk_id)
        + sys.getsizeof(chunk.note_id)
        + sys.getsizeof(chunk.author_id)
        + sys.getsizeof(chunk.section_path)
        + sys.getsizeof(chunk.content_md)
        + sys.getsizeof(chunk.chunk_type)
        + _str_list_bytes(chunk.heading_path)
        + _str_list_bytes(chunk.tags)
    )


def meta_bytes(meta: NoteMeta) -> int:
    """Approximate bytes of a note's metadata."""
    return (
        sys.getsizeof(meta)
        + sys.getsizeof(meta.note_id)
        + sys.getsizeof(meta.title)
        + _str_list_bytes(meta.tags)
    )
