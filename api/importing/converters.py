"""Turn uploaded or on-disk documents into markdown notes (pure: no database, no web framework).

`convert_file` converts one file's bytes (.md/.txt as written; .html, .docx, .pdf converted;
title and tags as docs/api.md says); `iter_import_paths` expands files and folders. Every
failure is an `ImportFileError` with a code, for that file only.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

import structlog

from api.importing.docx_md import docx_to_markdown
from api.importing.envelope import read_envelope
from api.importing.html_md import html_to_markdown, parse_html, soup_title, soup_to_markdown
from api.importing.metadata import (
    front_matter_tags,
    front_matter_times,
    front_matter_title,
    normalize_tags,
    read_markdown_metadata,
)
from api.importing.pdf_text import pdf_to_markdown
from api.importing.types import (
    SUPPORTED_EXTENSIONS,
    TEXT_EXTENSIONS,
    ImportedNote,
    ImportErrorCode,
    ImportFileError,
)

__all__ = [
    "SUPPORTED_EXTENSIONS",
    "ImportErrorCode",
    "ImportFileError",
    "ImportedNote",
    "convert_file",
    "html_to_markdown",
    "iter_import_paths",
]

log = structlog.get_logger(__name__)

_HTML_EXTENSIONS = frozenset({".html", ".htm"})
_UTF16_32_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_LE)
_SNIFF_BYTES = 8192


def _base_name(filename: str) -> str:
    # Browsers on Windows may send a full "C:\\dir\\file.docx" as the upload name.
    return PurePosixPath(filename.replace("\\", "/")).name


def _extension(name: str) -> str:
    return PurePosixPath(name).suffix.lower()


def _stem(name: str) -> str:
    return PurePosixPath(name).stem.strip() or name


def _decode_utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportFileError(
            "not_utf8", f"not valid UTF-8 (byte {exc.start}); save the file as UTF-8"
        ) from exc


def _convert_text(name: str, data: bytes) -> ImportedNote:
    content = _decode_utf8(data)
    if not content.strip():
        raise ImportFileError("empty", "the file has no text")
    exported = read_envelope(content)
    if exported is not None:  # a file `autonote export` wrote: the note as it was
        envelope, body = exported
        return ImportedNote(
            title=envelope.title or _stem(name),
            content_md=body,
            tags=envelope.tags,
            source_name=name,
            created_at=envelope.created,
            updated_at=envelope.updated,
        )
    meta = read_markdown_metadata(content)
    title = front_matter_title(meta.front_matter) or meta.first_h1 or _stem(name)
    tags = normalize_tags([*front_matter_tags(meta.front_matter), *meta.inline_tags])
    created, updated = front_matter_times(meta.front_matter)
    return ImportedNote(
        title=title,
        content_md=content,
        tags=tags,
        source_name=name,
        created_at=created,
        updated_at=updated,
    )


def _convert_html(name: str, data: bytes) -> ImportedNote:
    head = data[:_SNIFF_BYTES]
    if b"\x00" in head and not head.startswith(_UTF16_32_BOMS):
        raise ImportFileError("corrupt_file", "binary data, not an HTML document")
    soup = parse_html(data)
    document_title = soup_title(soup)
    content = soup_to_markdown(soup)
    return _converted(name, content, document_title, first_h1_wins=True)


def _converted(
    name: str, content: str, own_title: str | None, *, first_h1_wins: bool
) -> ImportedNote:
    if not content.strip():
        raise ImportFileError("empty", "no text found in the document")
    h1 = read_markdown_metadata(content, inline_tags=False).first_h1
    title = (h1 or own_title) if first_h1_wins else (own_title or h1)
    return ImportedNote(title=title or _stem(name), content_md=content, tags=[], source_name=name)


def convert_file(filename: str, data: bytes, *, max_bytes: int = 2_000_000) -> ImportedNote:
    """Convert one file's bytes to a note, dispatching on the extension of `filename`.

    Raises `ImportFileError` with code `unsupported_type`, `too_large` (over `max_bytes`,
    a .docx that inflates far beyond it, or HTML nested hundreds of levels deep), `empty`,
    `not_utf8` (.md/.txt), `corrupt_file` (content that is not what the extension claims,
    or is damaged) or `encrypted` (.pdf). CPU-bound (about a second for a large .docx or
    a megabyte of HTML): async callers should run it in a worker thread.
    """
    name = _base_name(filename)
    ext = _extension(name)
    if ext not in SUPPORTED_EXTENSIONS:
        shown = ext or "(no extension)"
        raise ImportFileError(
            "unsupported_type",
            f"{shown} is not supported; use one of {', '.join(sorted(SUPPORTED_EXTENSIONS))}",
        )
    if len(data) > max_bytes:
        raise ImportFileError("too_large", f"larger than the per-file limit of {max_bytes} bytes")
    if not data.strip():
        raise ImportFileError("empty", "the file is empty")
    try:
        if ext in TEXT_EXTENSIONS:
            note = _convert_text(name, data)
        elif ext in _HTML_EXTENSIONS:
            note = _convert_html(name, data)
        elif ext == ".docx":
            content, docx_title = docx_to_markdown(data, max_bytes=max_bytes)
            note = _converted(name, content, docx_title, first_h1_wins=False)
        else:
            content, pdf_title = pdf_to_markdown(data)
            if not content.strip():
                raise ImportFileError("empty", "no extractable text (a scanned PDF?)")
            note = _converted(name, content, pdf_title, first_h1_wins=False)
    except ImportFileError as exc:
        log.info("importing.file_rejected", source=name, code=exc.code, detail=exc.detail)
        raise
    log.debug(
        "importing.file_converted",
        source=name,
        kind=ext,
        bytes=len(data),
        chars=len(note.content_md),
        tags=len(note.tags),
    )
    return note


def _is_hidden(name: str) -> bool:
    return name.startswith(".")


def iter_import_paths(
    paths: list[Path], *, on_skip: Callable[[Path, ImportErrorCode], None] | None = None
) -> Iterator[Path]:
    """Expand files and folders into the supported files to import, in a stable order.

    Folders are walked recursively (an Obsidian vault works as is), skipping hidden
    directories and files (`.obsidian`, `.git`, `.trash`, `.DS_Store`) and not following
    directory symlinks (no loops). Files inside a folder are yielded sorted by path; the
    arguments keep their order; a file reached twice is yielded once. Files with an
    unsupported extension are not yielded: `on_skip(path, "unsupported_type")` is called
    so the caller can report them. A path given explicitly is used even if hidden.
    Raises `FileNotFoundError` (before yielding anything) if an argument does not exist.
    """
    missing = [path for path in paths if not path.exists()]
    if missing:
        raise FileNotFoundError(f"no such file or directory: {', '.join(map(str, missing))}")
    seen: set[Path] = set()

    def _accept(file: Path) -> bool:
        key = file.resolve()
        if key in seen:
            return False
        seen.add(key)
        if _extension(file.name) in SUPPORTED_EXTENSIONS:
            return True
        if on_skip is not None:
            on_skip(file, "unsupported_type")
        return False

    for root in paths:
        if not root.is_dir():
            if _accept(root):
                yield root
            continue
        found: list[Path] = []

        def _unreadable(error: OSError, root: Path = root) -> None:
            if on_skip is not None:
                on_skip(Path(error.filename or root), "unreadable")

        for dirpath, dirnames, filenames in os.walk(root, onerror=_unreadable):
            dirnames[:] = [d for d in dirnames if not _is_hidden(d)]
            # is_file(): a FIFO or socket in the tree would block or fail the reader.
            found.extend(
                Path(dirpath, f)
                for f in filenames
                if not _is_hidden(f) and Path(dirpath, f).is_file()
            )
        for file in sorted(found, key=lambda p: p.relative_to(root).parts):
            if _accept(file):
                yield file
