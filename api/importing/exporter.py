"""The client side of `autonote export`: every note of a user as a markdown file.

A note with a key is written at its key (a key that is not a `.md`, `.markdown` or `.txt`
path gets `.md` added, and one that is no safe relative path falls back to the title rule);
another note as "<title> <last 8 characters of its id>.md". Each file is the export block
(`envelope`) followed by the note's content exactly as stored, so `autonote import` or
`sync` of the folder into an empty database gives the same titles, contents, tags and
times back. Trashed notes go under `.trash/`, which import and sync skip.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

import typer

from api.importing.envelope import Envelope, render_envelope
from api.importing.types import TEXT_EXTENSIONS
from api.importing.upload import Remote, shown_path

TRASH = ".trash"
# Characters file systems refuse (Windows' set, the strictest) or that hide a file.
_UNSAFE = re.compile(r'[\x00-\x1f\x7f<>:"/\\|?*]')
_MAX_NAME_BYTES = 240


def safe_name(title: str) -> str:
    """A file name (without extension) for a title: unsafe characters as spaces, no
    leading dot, at most 240 UTF-8 bytes; "untitled" when nothing is left."""
    name = " ".join(_UNSAFE.sub(" ", title).split()).lstrip(". ").rstrip(". ")
    while len(name.encode("utf-8")) > _MAX_NAME_BYTES:
        name = name[:-1].rstrip(". ")
    return name or "untitled"


def key_path(key: str) -> str | None:
    """The relative path a key is written at, or None when it is no safe one (absolute, a
    `..` or hidden part, a character a file system refuses, a part too long)."""
    parts = key.split("/")
    for part in parts:
        unsafe = not part or part.startswith(".") or _UNSAFE.search(part)
        if unsafe or len(part.encode("utf-8")) > _MAX_NAME_BYTES or part != part.strip():
            return None
    suffix = PurePosixPath(key).suffix.lower()
    return key if suffix in TEXT_EXTENSIONS else key + ".md"


def note_path(note: dict[str, Any]) -> str:
    """Where a note is written, relative to the export folder (module docstring)."""
    key = note.get("external_id")
    path = key_path(key) if key else None
    return path or f"{safe_name(note['title'])} {note['id'][-8:]}.md"


def exported_text(note: dict[str, Any], path: str) -> str:
    """The file for a note written at `path`: export block, then the content as stored."""
    title = note["title"]
    envelope = Envelope(
        note_id=note["id"],
        title=None if PurePosixPath(path).stem == title else title,
        tags=list(note["tags"]),
        created=datetime.fromisoformat(note["created_at"]),
        updated=datetime.fromisoformat(note["updated_at"]),
        external_id=note.get("external_id"),
    )
    return render_envelope(envelope) + note["content_md"]


@dataclass(slots=True)
class Exporter:
    """Writes the notes of the key's user into `folder`."""

    remote: Remote
    folder: Path
    counts: Counter[str] = field(default_factory=Counter)
    _written: set[str] = field(default_factory=set)

    def export(self, status: str) -> None:
        """Every note of one status (`active` or `trashed`)."""
        for summary in self.remote.notes(status=status):
            note = self.remote.call("GET", f"/v1/notes/{summary['id']}").json()
            path = note_path(note)
            if status == "trashed":
                path = f"{TRASH}/{path}"
            self._write(note, path)

    def _write(self, note: dict[str, Any], path: str) -> None:
        """Write one note; at a path taken already (two names equal but for case) or that
        cannot be made (a key that is a folder of another key), under its full id."""
        if path.casefold() in self._written:
            path = str(PurePosixPath(path).with_name(f"{note['id']}.md"))
        target = self.folder / path
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(exported_text(note, path).encode("utf-8"))
        except OSError:
            path = f"{note['id']}.md"
            target = self.folder / path
            target.write_bytes(exported_text(note, path).encode("utf-8"))
        self._written.add(path.casefold())
        self.counts["exported"] += 1
        typer.echo(f"exported     {note['id']} -> {shown_path(Path(path))}")
