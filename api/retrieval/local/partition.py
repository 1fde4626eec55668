"""One author's share of the local index, and helpers to prepare and size its contents.

A `Partition` groups what one author's searches touch: the vector store, the full-text
table, the filter index and the note entries. `LocalIndex` serialises the writers; the
partition's changes run under its `lock`, which readers take too.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from api.retrieval.local.filters import NoteFilterIndex
from api.retrieval.local.fulltext import FullTextIndex
from api.retrieval.local.vectors import VectorStore
from api.retrieval.types import ChunkData, ChunkRecord, NoteMeta, SearchFilters


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

    def swap_in(self, group: list[PreparedNote]) -> None:
        """Make the group's notes this author's current ones, in both stores at once."""
        ords: list[int] = []
        next_ord = self.next_ord
        for p in group:
            entry = self.notes.get(p.meta.note_id)
            if entry is not None:
                ords.append(entry.ord)
            else:
                ords.append(next_ord)
                next_ord += 1
        with self.lock:
            self.fulltext.replace_notes([(o, p.data) for o, p in zip(ords, group, strict=True)])
            self.vectors.replace_notes(
                [(o, p.data, p.vectors) for o, p in zip(ords, group, strict=True)]
            )
            self.next_ord = next_ord
            for ord_, p in zip(ords, group, strict=True):
                entry = self.notes.get(p.meta.note_id)
                self.filters.set(ord_, p.meta, previous=entry.meta if entry else None)
                self.notes[p.meta.note_id] = NoteEntry(
                    meta=p.meta,
                    version=p.version,
                    ord=ord_,
                    chunk_count=len(p.data),
                    nbytes=meta_bytes(p.meta) + sum(chunk_bytes(c) for c in p.data),
                )

    def drop(self, note_id: str) -> None:
        """Remove a held note and all its chunks."""
        with self.lock:
            entry = self.notes.pop(note_id)
            self.filters.clear(entry.ord, entry.meta)
            self.fulltext.remove_note(entry.ord)
            self.vectors.remove_note(entry.ord)

    def set_meta(self, note: NoteMeta) -> None:
        """Replace a held note's metadata, keeping its chunks and indexed version."""
        with self.lock:
            entry = self.notes[note.note_id]
            meta = dataclasses.replace(note, indexed_version=entry.version)
            self.filters.set(entry.ord, meta, previous=entry.meta)
            entry.nbytes += meta_bytes(meta) - meta_bytes(entry.meta)
            entry.meta = meta

    def memory_bytes(self) -> int:
        """Estimated bytes held: both stores, the filter index and the note entries."""
        with self.lock:
            total = self.vectors.memory_bytes() + self.fulltext.memory_bytes()
            total += sys.getsizeof(self.notes) + self.filters.nbytes()
            return total + sum(e.nbytes + 120 for e in self.notes.values())


def prepare_note(
    note: NoteMeta, version: int, chunks: Sequence[ChunkRecord], dimensions: int
) -> PreparedNote:
    """A note update checked and ready to swap in. Raises `ValueError` when a chunk belongs
    to another note, author or version, when chunk ids repeat, or when a vector has the
    wrong shape."""
    seen: set[str] = set()
    for chunk in chunks:
        if chunk.note_id != note.note_id or chunk.author_id != note.author_id:
            raise ValueError(f"chunk {chunk.chunk_id} belongs to another note or author")
        if chunk.note_version != version:
            raise ValueError(
                f"chunk {chunk.chunk_id} has version {chunk.note_version}, not {version}"
            )
        if chunk.chunk_id in seen:
            raise ValueError(f"chunk id {chunk.chunk_id} appears twice")
        seen.add(chunk.chunk_id)
        shape = np.shape(chunk.vector)
        if shape != (dimensions,):
            raise ValueError(
                f"chunk {chunk.chunk_id} vector has shape {shape}, expected ({dimensions},)"
            )
    return PreparedNote(
        meta=dataclasses.replace(note, indexed_version=version),
        version=version,
        data=[chunk.data() for chunk in chunks],
        vectors=unit_rows([chunk.vector for chunk in chunks], dimensions),
    )


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
        + _str_list_bytes(list(chunk.aliases))
    )


def meta_bytes(meta: NoteMeta) -> int:
    """Approximate bytes of a note's metadata."""
    return (
        sys.getsizeof(meta)
        + sys.getsizeof(meta.note_id)
        + sys.getsizeof(meta.title)
        + _str_list_bytes(meta.tags)
    )
