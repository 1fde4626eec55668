"""`POST /v1/search` request and response (OpenAPI)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)

from api.chunking.data_uri import elide_marked
from api.retrieval.types import NoteResult, SearchFilters, SectionMatch
from api.schemas import NON_BLANK, FilterTag, JsonInt, normalize_tags, utf8_clean

if TYPE_CHECKING:
    from api.retrieval.service import SearchOutcome

NoteIdStr = Annotated[str, StringConstraints(pattern=r"^[0-9a-fA-F]{24}$")]


# RFC 3339 date-time, what the schema's `format: date-time` means: a date, a time and an
# offset. pydantic alone also reads numbers and numeric strings ("6") as Unix times and a
# bare date or an offset-less time as naive, none of which the documented format allows.
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})", re.ASCII
)


def _rfc3339(value: object) -> object:
    """Accept only an RFC 3339 date-time string; pydantic then checks the values."""
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        raise ValueError(
            "expected an ISO 8601 date-time string with a UTC offset (RFC 3339), "
            "e.g. 2026-01-31T00:00:00Z"
        )
    return value


def _in_utc(value: datetime) -> datetime:
    """The instant in UTC, which is how it is compared and stored. An offset can move a
    valid RFC 3339 instant outside the years 1-9999 Python and BSON can hold
    (0001-01-01T00:00:00+00:01 is in year 0 in UTC): such an instant is before or after
    every note, so it is clamped to the first or last representable one."""
    try:
        return value.astimezone(UTC)
    except OverflowError:
        edge = datetime.min if value.year == datetime.min.year else datetime.max
        return edge.replace(tzinfo=UTC)


DateTimeStr = Annotated[datetime, BeforeValidator(_rfc3339), AfterValidator(_in_utc)]


class FiltersIn(BaseModel):
    """Applied before ranking. `tags`: notes with ANY of these tags (compared as stored:
    trimmed); `note_ids`: only these notes; `updated_after`: notes changed after this
    instant."""

    model_config = ConfigDict(extra="forbid")
    tags: list[FilterTag] | None = Field(None, max_length=100)
    note_ids: list[NoteIdStr] | None = Field(None, max_length=1000)
    updated_after: DateTimeStr | None = None

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else normalize_tags([utf8_clean(t, "tag") for t in v])

    @field_validator("note_ids")
    @classmethod
    def _ids(cls, v: list[str] | None) -> list[str] | None:
        if v is not None:
            bad = [
                i for i in v if len(i) != 24 or any(c not in "0123456789abcdefABCDEF" for c in i)
            ]
            if bad:
                raise ValueError(f"invalid note id {bad[0][:40]!r}: expected 24 hex characters")
            return [i.lower() for i in v]
        return v

    def to_filters(self) -> SearchFilters:
        return SearchFilters(
            tags=self.tags, note_ids=self.note_ids, updated_after=self.updated_after
        )


# The largest body a valid search can need: every field at its maximum and every character
# `\u`-escaped (astral ones as surrogate pairs, 12 bytes): a 2 000-character query, 100
# tags of 512 and 1 000 note ids come to ~0.78 MB (tests/security/test_route_body_limits.py
# builds it). Bodies are parsed on the event loop, so the limit stays near that size.
SEARCH_MAX_BODY_BYTES = 1_000_000


class SearchRequest(BaseModel):
    """A search over your notes' chunks, returned grouped by note."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "query": "how do I restore the nightly postgres backup?",
                    "limit": 5,
                    "chunks_per_note": 3,
                    "mode": "hybrid",
                    "filters": {"tags": ["ops"]},
                }
            ]
        },
    )
    query: str = Field(min_length=1, max_length=2000, pattern=NON_BLANK)
    limit: JsonInt = Field(5, ge=1, le=50, description="Notes to return")
    chunks_per_note: JsonInt = Field(3, ge=1, le=20, description="Matching sections per note")
    mode: Literal["hybrid", "vector", "keyword"] = "hybrid"
    filters: FiltersIn | None = None

    @field_validator("query")
    @classmethod
    def _query(cls, v: str) -> str:
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("query is not valid Unicode") from None
        if not v.strip():
            raise ValueError("query must not be blank")
        return v

    def options(self) -> dict[str, Any]:
        """The keyword arguments of `RetrievalService.search` this request asks for."""
        return {
            "limit": self.limit,
            "chunks_per_note": self.chunks_per_note,
            "mode": self.mode,
            "filters": self.filters.to_filters() if self.filters else None,
        }


class MatchingChunk(BaseModel):
    """A matching section: one chunk, or adjacent chunks of one section merged."""

    chunk_id: str
    chunk_ids: list[str]
    chunk_index: int
    chunk_indexes: list[int]
    heading_path: list[str]
    section_path: str
    content: str = Field(
        description="The section's text, as in the note except that the base64 of a pasted "
        "image (`data:` URI) reads `…` and text past 64 000 characters is cut (a "
        "section is normally at most 6 000, a whole code block or table about 30 000); "
        "`elided_chars` counts what is left out. The offsets index the note's full text. "
        "Two cases add text instead: one part of a table or code block split over several "
        "chunks, found alone, shows that part as it was embedded, with the table's header "
        "rows or the code fence repeated so it reads on its own (the note's text at the "
        "offsets holds the part's own rows or lines); and while a content edit waits to be "
        "indexed, a section of several chunks is their texts joined by blank lines (a `…` "
        "line between chunks that are not adjacent)."
    )
    elided_chars: int = Field(0, description="Characters of the section not in `content`")
    start_offset: int = Field(description="Character offset into the note's content_md")
    end_offset: int
    score: float
    note_version: int | None = Field(
        None,
        description="The note version these offsets index: its indexed version. A note "
        "edited since (a higher `version`) is being re-indexed and its text has moved.",
    )
    relevance: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="Estimated probability that this section answers the query, calibrated "
        "on held-out questions: of sections given 0.4, about 4 in 10 answered theirs. "
        "Comparable across queries, unlike `score` (docs/search.md#relevance). Null for "
        "the note-level fallback.",
    )


# A section is at most `max_section_chars` (6 000) unless one chunk is longer: a whole code
# block or table may reach the model's input (8 191 cl100k tokens, ~30 000 characters), and
# a chunk of megabytes of words the local model reads as one unknown token each is one chunk.
MAX_CONTENT_CHARS = 64_000


def _shown(text: str) -> tuple[str, int]:
    """A section's `content` and `elided_chars` (see `MatchingChunk.content`)."""
    shown, markers = elide_marked(text)
    if len(shown) > MAX_CONTENT_CHARS:
        markers = [m for m in markers if m < MAX_CONTENT_CHARS]
        shown = shown[:MAX_CONTENT_CHARS]
        note_chars = len(shown) - len(markers)  # markers are one character each
        shown += "…"
    else:
        note_chars = len(shown) - len(markers)
    return shown, len(text) - note_chars


class NoteHit(BaseModel):
    note_id: str
    title: str
    tags: list[str]
    updated_at: datetime
    score: float
    relevance: float | None = Field(
        None, ge=0.0, le=1.0, description="The best `relevance` of its matching sections"
    )
    matching_chunks: list[MatchingChunk]

    @classmethod
    def from_result(cls, r: NoteResult) -> NoteHit:
        return cls(
            note_id=r.note_id,
            title=r.title,
            tags=r.tags,
            updated_at=r.updated_at,
            score=r.score,
            relevance=r.relevance,
            matching_chunks=[_matching_chunk(s) for s in r.matching_chunks],
        )


def _matching_chunk(s: SectionMatch) -> MatchingChunk:
    content, elided_chars = _shown(s.content_md)
    return MatchingChunk(
        chunk_id=s.chunk_ids[0] if s.chunk_ids else "",
        chunk_ids=s.chunk_ids,
        chunk_index=s.chunk_indexes[0] if s.chunk_indexes else 0,
        chunk_indexes=s.chunk_indexes,
        heading_path=s.heading_path,
        section_path=s.section_path,
        content=content,
        elided_chars=elided_chars,
        start_offset=s.start_offset,
        end_offset=s.end_offset,
        score=s.score,
        note_version=s.note_version,
        relevance=s.relevance,
    )


class SearchResponse(BaseModel):
    results: list[NoteHit]
    took_ms: float
    mode: Literal["hybrid", "vector", "keyword", "note_level"]
    backend: str
    warning: str | None = Field(
        None,
        description="Set when results are degraded, e.g. keyword-only while the "
        "embedding provider is unavailable",
    )

    @classmethod
    def from_outcome(cls, outcome: SearchOutcome) -> SearchResponse:
        return cls(
            results=[NoteHit.from_result(r) for r in outcome.results],
            took_ms=outcome.took_ms,
            mode=outcome.mode,
            backend=outcome.backend,
            warning=outcome.warning,
        )


class IndexGeneration(BaseModel):
    """A chunker and embedding model: the chunks they make form one index generation."""

    generation: str | None = Field(description="Short hash of the chunker and model")
    embedding_model: str | None = Field(description='"<model>@<dimensions>"')
    chunking_version: str | None = None


class IndexNotes(BaseModel):
    total: int = Field(description="Your active notes")
    done: int = Field(description="Indexed with the configured chunker and model")
    left: int
    queued: int = Field(description="Of those left: waiting for or being indexed")
    failed: int = Field(description="Of those left: indexing gave up (they hold the switch)")


class IndexStatusResponse(BaseModel):
    """How far re-indexing your notes into the configured chunker and embedding model is.
    While it runs, search reads your previous index (`serving`) and switches to the new one
    at once when all your notes are in it."""

    configured: IndexGeneration
    serving: IndexGeneration = Field(description="What your search reads now")
    switching: bool = Field(description="Your search still reads a previous generation")
    notes: IndexNotes
    chunks_done: int = Field(description="Chunks of your notes in the configured generation")
    tokens_embedded: int = Field(description="Tokens embedded for your notes by this re-index")
    estimated_tokens_left: int
    price_per_million_tokens_usd: float | None = Field(
        description="The configured model's price (0 for the local model; null if unknown)"
    )
    cost_so_far_usd: float | None
    estimated_cost_left_usd: float | None
    estimated_seconds_left: float | None = Field(
        description="At the rate measured since the re-index started (or restarted)"
    )
