"""Arguments and results of the MCP tools that the REST API has no model for (the others
reuse its request and response models, so both surfaces validate alike)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from api.chat.schemas import HistoryMessage
from api.notes.paging import CURSOR_PATTERN
from api.notes.schemas import IndexStatus, NoteStatus
from api.retrieval.schemas import FiltersIn
from api.schemas import NON_BLANK, OBJECT_ID_PATTERN, FilterTag

NoteIdField = Field(pattern=OBJECT_ID_PATTERN, description="Note id (24 hex digits)")


class GetNoteArgs(BaseModel):
    """A whole note, or the span `start_offset`..`end_offset` of its markdown (character
    offsets, as search results and citations give them)."""

    model_config = ConfigDict(extra="forbid")
    note_id: str = NoteIdField
    start_offset: int | None = Field(None, ge=0, description="First character (default 0)")
    end_offset: int | None = Field(
        None, ge=0, description="One past the last character (default: the note's end)"
    )


class NoteText(BaseModel):
    """A note's markdown (`content_md`: the whole note, or the span asked for)."""

    id: str
    title: str
    tags: list[str]
    status: NoteStatus
    version: int
    updated_at: datetime
    index_status: IndexStatus
    content_md: str
    start_offset: int
    end_offset: int
    length: int = Field(description="Characters in the whole note")


class AskArgs(BaseModel):
    """A question answered from your notes, with numbered citations."""

    model_config = ConfigDict(extra="forbid")
    question: str = Field(min_length=1, max_length=8000, pattern=NON_BLANK)
    history: list[HistoryMessage] = Field(
        default_factory=list, max_length=20, description="Earlier turns, oldest first"
    )
    filters: FiltersIn | None = None


class ListNotesArgs(BaseModel):
    """Your notes, most recently created first (not their text: use get_note)."""

    model_config = ConfigDict(extra="forbid")
    limit: int = Field(20, ge=1, le=100)
    tag: FilterTag | None = Field(None, description="Only notes with this tag")
    cursor: str | None = Field(
        None, pattern=CURSOR_PATTERN, description="`next_cursor` of the previous page"
    )


class AppendArgs(BaseModel):
    """Markdown added at the end of a note, after a blank line."""

    model_config = ConfigDict(extra="forbid")
    note_id: str = NoteIdField
    text: str = Field(min_length=1, pattern=NON_BLANK)
    expected_version: int | None = Field(
        None, ge=1, description="Refuse if the note is no longer at this version"
    )


class Appended(BaseModel):
    """Where the appended text now sits in the note (read it back with get_note)."""

    id: str
    version: int
    index_status: IndexStatus
    start_offset: int
    end_offset: int
