"""Data shared by every search backend (local in-process index, Atlas) and the ranking steps.

The flow is: a backend returns chunks with one retriever's score (`ChunkData` + float) →
`fusion` turns one or more ranked lists into `ChunkHit`s with a fused score → `grouping`
folds hits into `NoteResult`s whose `matching_chunks` are merged `SectionMatch`es.

Identifiers are strings here (`str(ObjectId)`): the pure layers never import bson, and the
repository layer converts at the edge (`ChunkHit.from_document` does it for search results).
Datetimes are compared in UTC; naive datetimes (what PyMongo returns unless the client is
`tz_aware`) are taken to be UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

import numpy as np


def as_utc(value: datetime) -> datetime:
    """`value` as an aware UTC datetime (naive values are UTC, as MongoDB stores them)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


@dataclass(slots=True, frozen=True, kw_only=True)
class ChunkData:
    """One chunk as search sees it: everything about it except its vector.

    This is what the local index keeps per chunk (the vectors live in its matrix) and what
    searches return next to their score.
    """

    chunk_id: str
    note_id: str
    author_id: str
    note_version: int
    chunk_index: int
    heading_path: list[str]
    section_path: str
    content_md: str
    start_offset: int
    end_offset: int
    tags: list[str] = field(default_factory=list)
    chunk_type: str = "text"
    # The chunk's section among its note's (chunks of one section share it); None for
    # chunks indexed before chunks carried it (grouping then falls back on the text).
    section_index: int | None = None
    # The note's other names (front matter `aliases`), keyword-indexed with the breadcrumb.
    aliases: tuple[str, ...] = ()


def section_index_of(doc: Mapping[str, Any]) -> int | None:
    """A stored chunk's `section_index`, None when absent or not a whole number."""
    value = doc.get("section_index")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


CHUNK_DATA_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(ChunkData))


@dataclass(slots=True, frozen=True, kw_only=True)
class ChunkRecord(ChunkData):
    """A chunk as the indexer hands it to a search backend: data, embedded text and vector.

    `vector` is a float32 vector, L2-normalised (cosine similarity is a dot product), of the
    embedding model's dimensions. `embedding_text` (breadcrumb + content) is what was
    embedded; backends need not keep it.
    """

    embedding_text: str
    vector: np.ndarray

    def data(self) -> ChunkData:
        """The same chunk without its vector and embedded text (what an index stores)."""
        return ChunkData(**{name: getattr(self, name) for name in CHUNK_DATA_FIELDS})


@dataclass(slots=True, frozen=True, kw_only=True)
class NoteMeta:
    """What search needs to know about a note beyond its chunks: filters and result fields."""

    note_id: str
    author_id: str
    title: str
    tags: list[str]
    updated_at: datetime
    # The note's `indexed_version` when known: hits of any other version are stale (in
    # flight during a re-index, or leftovers) and `grouping` drops them.
    indexed_version: int | None = None


@dataclass(slots=True, frozen=True, kw_only=True)
class SearchFilters:
    """User filters, applied *before* ranking (a mask/pre-filter, never after a limit).

    Semantics, identical in every backend:
    - `tags`: the note has ANY of these tags (OR). Matching is exact (case-sensitive), as
      MongoDB `$in` and Atlas filter fields match. Tags narrow results; requiring ALL tags
      can be done by the caller intersecting per-tag results if ever needed.
    - `note_ids`: the note is one of these.
    - `updated_after`: the note's `updated_at` is strictly later than this instant.
    `None` means "no constraint". An empty list is an empty set: it matches nothing (so a
    client that computed an empty allow-list never silently widens its search); the HTTP
    layer may map `[]` to `None` if it wants "no filter" semantics for empty inputs.
    """

    tags: list[str] | None = None
    note_ids: list[str] | None = None
    updated_after: datetime | None = None

    @property
    def is_empty(self) -> bool:
        """True when no constraint is set (every note of the author passes)."""
        return self.tags is None and self.note_ids is None and self.updated_after is None

    def matches(self, note: NoteMeta) -> bool:
        """Whether `note` passes every constraint."""
        if self.note_ids is not None and note.note_id not in self.note_ids:
            return False
        if self.tags is not None and not set(self.tags).intersection(note.tags):
            return False
        if self.updated_after is not None:
            return as_utc(note.updated_at) > as_utc(self.updated_after)
        return True


@dataclass(slots=True, frozen=True, kw_only=True)
class ChunkHit(ChunkData):
    """A chunk in a ranked result: its data, its (fused) score and where each retriever put it.

    `ranks` maps a retriever name ("vector", "keyword", ...) to the 1-based rank it gave the
    chunk; `retriever_scores` to that retriever's raw score (cosine, BM25, Atlas score).
    Retrievers that did not return the chunk are absent from both.
    """

    score: float
    ranks: dict[str, int] = field(default_factory=dict)
    retriever_scores: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_chunk(
        cls,
        chunk: ChunkData,
        score: float,
        *,
        ranks: Mapping[str, int] | None = None,
        retriever_scores: Mapping[str, float] | None = None,
    ) -> ChunkHit:
        """A hit for `chunk` (a `ChunkData`, `ChunkRecord` or another `ChunkHit`)."""
        values = {name: getattr(chunk, name) for name in CHUNK_DATA_FIELDS}
        return cls(
            **values,
            score=float(score),
            ranks=dict(ranks or {}),
            retriever_scores=dict(retriever_scores or {}),
        )

    @classmethod
    def from_document(cls, doc: Mapping[str, Any], *, score_field: str = "score") -> ChunkHit:
        """A hit from a `note_chunks` document returned by an aggregation (ObjectIds become
        strings; the score is read from `score_field`, as projected with `$meta`)."""
        heading_path = list(doc.get("heading_path") or [])
        return cls(
            chunk_id=str(doc["_id"]),
            note_id=str(doc["note_id"]),
            author_id=str(doc["author_id"]),
            note_version=int(doc["note_version"]),
            chunk_index=int(doc["chunk_index"]),
            heading_path=[str(h) for h in heading_path],
            section_path=str(doc.get("section_path") or " > ".join(heading_path)),
            content_md=str(doc.get("content_md", "")),
            start_offset=int(doc.get("start_offset", 0)),
            end_offset=int(doc.get("end_offset", 0)),
            tags=[str(t) for t in doc.get("tags") or []],
            chunk_type=str(doc.get("chunk_type", "text")),
            section_index=section_index_of(doc),
            score=float(doc.get(score_field, 0.0)),
        )


@dataclass(slots=True, frozen=True, kw_only=True)
class SectionMatch:
    """One matching section of a note: one chunk, or several chunks of the same section
    merged into one span (`start_offset`..`end_offset` in the note's `content_md`)."""

    chunk_ids: list[str]
    chunk_indexes: list[int]
    heading_path: list[str]
    section_path: str
    content_md: str
    start_offset: int
    end_offset: int
    score: float
    # The note version whose content_md the offsets index (its indexed version; the note
    # may have been edited since). None when unknown.
    note_version: int | None = None
    # Each retriever's best raw score and best rank over the section's chunks (retrievers
    # that returned none of them are absent): the evidence `relevance` is computed from.
    retriever_scores: dict[str, float] = field(default_factory=dict)
    ranks: dict[str, int] = field(default_factory=dict)
    # Estimated probability that the section answers the query (api.retrieval.relevance);
    # None until estimated.
    relevance: float | None = None


@dataclass(slots=True, frozen=True, kw_only=True)
class NoteResult:
    """A note in search results, ranked by a score built from its matching chunks."""

    note_id: str
    title: str
    tags: list[str]
    updated_at: datetime
    score: float
    matching_chunks: list[SectionMatch]
    # The best `relevance` of its sections (None until estimated).
    relevance: float | None = None
