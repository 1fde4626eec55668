"""Value types shared by the importers: the converted note and the per-file error."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

# Stored as written (read in-process); every other supported type goes through a parser.
TEXT_EXTENSIONS: frozenset[str] = frozenset({".md", ".markdown", ".txt"})
SUPPORTED_EXTENSIONS: frozenset[str] = TEXT_EXTENSIONS | {".html", ".htm", ".docx", ".pdf"}

ImportErrorCode = Literal[
    "unsupported_type",
    "too_large",
    "not_utf8",
    "corrupt_file",
    "encrypted",
    "empty",
    "too_complex",  # over the conversion's time or memory budget (api.importing.sandbox)
    "unreadable",  # a file or folder the importing process may not read (CLI)
]


@dataclass
class ImportedNote:
    """A file converted to a markdown note, ready to be stored by the caller.

    `content_md` is markdown (for `.md`/`.txt` the file as written, front matter included,
    except the block `autonote export` adds); `source_name` is the file name the note came
    from (no directories), for reporting. `created_at`/`updated_at`: the front matter's
    `created`/`updated` when given (aware UTC).
    """

    title: str
    content_md: str
    tags: list[str] = field(default_factory=list)
    source_name: str = ""
    created_at: datetime | None = None
    updated_at: datetime | None = None


class ImportFileError(Exception):
    """One file could not be imported; the rest of a batch carries on.

    `code` is machine-readable (one of `ImportErrorCode`), `detail` is a sentence for a human.
    """

    def __init__(self, code: ImportErrorCode, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code: ImportErrorCode = code
        self.detail = detail

    def to_dict(self) -> dict[str, str]:
        """The error as a JSON-ready body fragment (`{"code": ..., "detail": ...}`)."""
        return {"code": self.code, "detail": self.detail}


@dataclass
class ImportReport:
    """What one import request did: per file, the stored note (as the API returns it), its
    warnings and what storing it did (`created`, `updated`, `unchanged`), or the error code
    and detail."""

    imported: list[tuple[str, dict[str, Any], list[str], str]] = field(default_factory=list)
    errors: list[tuple[str, str, str]] = field(default_factory=list)  # filename, code, detail
