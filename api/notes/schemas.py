"""Request and response schemas of the notes API (they become the OpenAPI document)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)

from api.notes.stored import (
    note_content,
    note_created_at,
    note_external_id,
    note_index_status,
    note_status,
    note_tags,
    note_title,
    note_updated_at,
)
from api.notes.types import key_folder
from api.notes.versioning import whole_version
from api.schemas import CONTROL_CHARS, TEXT_PATTERN, Tag, clean_tags, utf8_clean

NoteStatus = Literal["active", "trashed"]
IndexStatus = Literal["pending", "indexing", "indexed", "failed", "disabled"]

_EXAMPLE_MD = "## Setup\n\nInstall with `pip install autonote`.\n\n## Usage\n\nRun `make run`."

EXTERNAL_ID_MAX_CHARS = 1024
# A client's key for a note (a path in a synced folder, an id in another system): one line,
# no control characters, at least one visible character; compared exactly (not trimmed).
ExternalId = Annotated[
    str,
    StringConstraints(min_length=1, max_length=EXTERNAL_ID_MAX_CHARS, pattern=TEXT_PATTERN),
    AfterValidator(lambda v: utf8_clean(v, "external_id")),
    Field(
        description="Your key for the note, unique among your notes (e.g. a file's path in "
        "a synced folder); at most 1024 characters, one line",
        examples=["projects/autonote/setup.md"],
    ),
]


def _clean_title(value: str) -> str:
    value = utf8_clean(value, "title").strip()
    if not value:
        raise ValueError("title must not be empty or blank")
    if CONTROL_CHARS.search(value):
        raise ValueError("title must not contain control characters or line breaks")
    return value


class NoteCreate(BaseModel):
    """A new note. Tags are de-duplicated (order kept); the title is trimmed."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"title": "Project setup", "content_md": _EXAMPLE_MD, "tags": ["howto", "python"]}
            ]
        },
    )
    title: str = Field(min_length=1, max_length=500, pattern=TEXT_PATTERN)
    content_md: str = Field(
        description="Markdown body (limit: AUTONOTE_MAX_NOTE_BYTES UTF-8 bytes)"
    )
    tags: list[Tag] = Field(default_factory=list, max_length=1000)

    @field_validator("title")
    @classmethod
    def _title(cls, v: str) -> str:
        return _clean_title(v)

    @field_validator("content_md")
    @classmethod
    def _content(cls, v: str) -> str:
        return utf8_clean(v, "content_md")

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str]) -> list[str]:
        return clean_tags(v)


class NoteUpsert(NoteCreate):
    """The whole note a key should name (`PUT /v1/notes/by-external-id`): created when the
    key is new, else its title, content and tags are replaced (tags omitted = none)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "external_id": "projects/setup.md",
                    "title": "Project setup",
                    "content_md": _EXAMPLE_MD,
                    "tags": ["howto"],
                }
            ]
        },
    )
    external_id: ExternalId


def _patch_schema(schema: dict[str, Any]) -> None:
    """Document the real contract: at least one field, and a present field is never null."""
    schema["minProperties"] = 1
    for prop in schema["properties"].values():
        options = [o for o in prop.pop("anyOf", []) if o.get("type") != "null"]
        if options:
            prop.update(options[0])
        prop.pop("default", None)
    schema["examples"] = [{"content_md": "## Usage\n\nRun `make test` too."}, {"tags": ["archive"]}]


class NotePatch(BaseModel):
    """A partial update: only the fields present change. `version` increases only when the
    title, the content or the tags actually change."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_patch_schema)
    title: str | None = Field(None, min_length=1, max_length=500, pattern=TEXT_PATTERN)
    content_md: str | None = None
    tags: list[Tag] | None = Field(None, max_length=1000)
    external_id: ExternalId | None = None

    @field_validator("title")
    @classmethod
    def _title(cls, v: str | None) -> str | None:
        if v is None:
            raise ValueError("title may be omitted but not null")
        return _clean_title(v)

    @field_validator("external_id", mode="before")
    @classmethod
    def _external_id(cls, v: Any) -> Any:
        if v is None:
            raise ValueError("external_id may be omitted but not null")
        return v

    @field_validator("content_md")
    @classmethod
    def _content(cls, v: str | None) -> str | None:
        if v is None:
            raise ValueError("content_md may be omitted but not null")
        return utf8_clean(v, "content_md")

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            raise ValueError("tags may be omitted but not null")
        return clean_tags(v)


class IndexStats(BaseModel):
    """What the last indexing run of this note did and cost."""

    chunks: int
    embedded: int
    reused: int
    tokens_embedded: int
    duration_ms: float


class NoteOut(BaseModel):
    """A note with its indexing state (`index_status`, `indexed_version`, ...)."""

    id: str
    title: str
    content_md: str
    tags: list[str]
    external_id: str | None = Field(None, description="Your key for the note, if it has one")
    folder: str | None = Field(
        None, description='The key\'s folder: what precedes its last "/" ("" at the top)'
    )
    status: NoteStatus
    version: int
    created_at: datetime
    updated_at: datetime
    index_status: IndexStatus
    indexed_version: int | None = None
    index_error: str | None = None
    index_attempts: int = 0
    chunk_count: int = 0
    chunking_strategy: str | None = None
    chunking_version: str | None = None
    embedding_model: str | None = None
    last_chunked_at: datetime | None = None
    last_index_stats: IndexStats | None = None

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> NoteOut:
        return cls(
            id=str(doc["_id"]),
            title=note_title(doc),
            content_md=note_content(doc),
            tags=note_tags(doc),
            external_id=note_external_id(doc),
            folder=_folder(doc),
            status=note_status(doc),
            version=whole_version(doc.get("version")),
            created_at=note_created_at(doc),
            updated_at=note_updated_at(doc),
            index_status=note_index_status(doc),
            indexed_version=doc.get("indexed_version"),
            index_error=doc.get("index_error"),
            index_attempts=int(doc.get("index_attempts") or 0),
            chunk_count=int(doc.get("chunk_count") or 0),
            chunking_strategy=doc.get("chunking_strategy"),
            chunking_version=doc.get("chunking_version"),
            embedding_model=doc.get("embedding_model"),
            last_chunked_at=doc.get("last_chunked_at"),
            last_index_stats=doc.get("last_index_stats"),
        )


def _folder(doc: dict[str, Any]) -> str | None:
    key = note_external_id(doc)
    if key is None:
        return None
    folder = doc.get("folder")
    return folder if isinstance(folder, str) else key_folder(key)


class NoteSummary(BaseModel):
    """A note in a listing (no body; fetch the note for `content_md`)."""

    id: str
    title: str
    tags: list[str]
    external_id: str | None = None
    folder: str | None = None
    status: NoteStatus
    version: int
    created_at: datetime
    updated_at: datetime
    index_status: IndexStatus
    chunk_count: int = 0

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> NoteSummary:
        full = NoteOut.from_doc({**doc, "content_md": ""})
        return cls(**full.model_dump(include=set(cls.model_fields)))


class NoteList(BaseModel):
    """One page of notes, newest first; pass `next_cursor` as `cursor` for the next page."""

    items: list[NoteSummary]
    next_cursor: str | None


class ChunkOut(BaseModel):
    """One chunk of a note's indexed version (vectors are never returned)."""

    id: str
    chunk_index: int
    total_chunks: int
    chunk_position: str
    heading_path: list[str]
    section_path: str
    section_index: int | None = Field(
        default=None,
        description="The chunk's heading section, numbered in note order: chunks of one "
        "section share it, sibling sections with the same heading path do not (null for "
        "chunks indexed before chunks carried it)",
    )
    chunk_type: str
    content_md: str
    start_offset: int
    end_offset: int
    token_count: int
    content_hash: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    embedding_model: str | None = None
    note_version: int

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> ChunkOut:
        fields = {k: doc.get(k) for k in cls.model_fields if k != "id"}
        fields["metadata"] = doc.get("metadata") or {}
        section = doc.get("section_index")
        whole = isinstance(section, int) and not isinstance(section, bool)
        fields["section_index"] = section if whole else None
        return cls(id=str(doc["_id"]), **fields)


class ChunkList(BaseModel):
    """The chunks of the note's `indexed_version`, in document order."""

    note_id: str
    indexed_version: int | None
    index_status: IndexStatus
    items: list[ChunkOut]
