"""Request and response schemas of the import route (`POST /v1/notes/import`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.notes.schemas import NoteSummary
from api.schemas import Tag, clean_tags


class ImportOptions(BaseModel):
    """The non-file fields of an import request (multipart form fields)."""

    model_config = ConfigDict(extra="forbid")
    tags: list[Tag] = Field(default_factory=list, max_length=1000)
    key_by: Literal["filename"] | None = None

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str]) -> list[str]:
        return clean_tags(v)


class ImportedFile(BaseModel):
    filename: str
    note: NoteSummary
    outcome: Literal["created", "updated", "unchanged"] = Field(
        description="`created`; with `key_by=filename` also `updated` (the note with that "
        "key changed, or was restored from the trash) or `unchanged` (it already held this)"
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="What was changed to import the file (its own tags cut or dropped to fit)",
    )


class ImportFailure(BaseModel):
    filename: str
    error: str = Field(examples=["unsupported_type", "too_large", "not_utf8", "corrupt_file"])
    detail: str


class ImportResult(BaseModel):
    """Per-file outcome: files that failed are listed with the reason; the rest imported."""

    imported: list[ImportedFile]
    errors: list[ImportFailure]
