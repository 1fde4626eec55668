"""The client side of `autonote sync`: a folder mirrored into a running server.

Every supported file is upserted by its key (its path from the root, `keys`); a note whose
key lies under the folder's prefix and whose file is gone is trashed (only keys a folder
walk could give: supported files outside hidden folders). A file that moved keeps its note:
a new key whose text equals a gone note's content takes over that note (PATCH of its
`external_id`), then the upsert applies any other change (a title from the file name). Such
pairs are looked for among at most `MAX_PAIRED` gone notes, and, when watching, within one
batch of changes. Watching (`watchfiles`) applies each batch of changes the same way; a
change to a folder (created, moved, deleted) makes a full pass.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import typer

from api.importing.converters import iter_import_paths
from api.importing.envelope import read_envelope
from api.importing.keys import file_key, key_problem, walked_key
from api.importing.types import SUPPORTED_EXTENSIONS, TEXT_EXTENSIONS
from api.importing.upload import Uploader, shown_path

if TYPE_CHECKING:
    from watchfiles import Change

MAX_PAIRED = 200


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def file_digest(path: Path) -> str | None:
    """The digest of the content a text file's note would hold (None for other files or
    an unreadable one)."""
    if path.suffix.lower() not in TEXT_EXTENSIONS:
        return None
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None
    exported = read_envelope(text)
    return text_digest(exported[1] if exported else text)


@dataclass(slots=True)
class Mirror:
    """Keeps the notes under `prefix` (the folder's keys) equal to the folder's files."""

    uploader: Uploader
    folder: Path
    root: Path
    prefix: str
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def remote(self) -> Any:
        return self.uploader.remote

    def full(self) -> None:
        """One pass over the whole folder. Nothing is trashed when part of it could not be
        listed: its files would look gone."""
        local, complete = self._local()
        server = {n["external_id"]: n for n in self.remote.notes(external_id_prefix=self.prefix)}
        gone = {k: n for k, n in server.items() if k not in local and self._ours(k)}
        if not complete and gone:
            typer.echo(
                f"autonote: part of {shown_path(self.folder)} is unreadable: no note "
                "is trashed this pass",
                err=True,
            )
            gone = {}
        new = {k: p for k, p in local.items() if k not in server}
        self._apply(local, gone, new)

    def changed(self, changes: set[tuple[Change, str]]) -> None:
        """Apply one batch of `watchfiles` changes (a full pass when a folder changed)."""
        paths = {Path(raw) for _, raw in changes}
        if any(p.is_dir() or (not p.exists() and not p.suffix) for p in paths):
            self.full()
            return
        upserts: dict[str, Path] = {}
        gone: dict[str, dict[str, Any]] = {}
        for path in sorted(paths):
            key = self._key(path)
            if key is None:
                continue
            if path.is_file():
                upserts[key] = path
            elif (note := self._lookup(key)) is not None:
                gone[key] = note
        new = {k: p for k, p in upserts.items() if not gone or self._lookup(k) is None}
        self._apply(upserts, gone, new)

    def _apply(
        self, upserts: dict[str, Path], gone: dict[str, dict[str, Any]], new: dict[str, Path]
    ) -> None:
        moved = self._pair(new, gone)
        self.uploader.send(sorted((p, k) for k, p in upserts.items()))
        for key, note in sorted(gone.items()):
            if key not in moved:
                self._trash(key, note)

    def _local(self) -> tuple[dict[str, Path], bool]:
        """The folder's supported files by key (those without a valid key are reported),
        and whether every folder in it could be listed."""
        unreadable: list[Path] = []

        def skipped(path: Path, code: str) -> None:
            if code == "unreadable":
                unreadable.append(path)
                self.uploader.fail(shown_path(path), "unreadable")

        local: dict[str, Path] = {}
        for path in iter_import_paths([self.folder], on_skip=skipped):
            key = self._key(path)
            if key is not None:
                local[key] = path
        return local, not unreadable

    def _key(self, path: Path) -> str | None:
        """The key of a file under the folder; None (reported) when it cannot have one,
        None (silently) for files a walk skips."""
        key = file_key(path, self.root)
        if key is None or not self._ours(key):
            return None
        problem = key_problem(key)
        if problem is not None:
            self.uploader.fail(shown_path(path), problem)
            return None
        return key

    def _ours(self, key: str) -> bool:
        """Whether a folder walk could give this key (so a missing file means a gone one)."""
        return key.startswith(self.prefix) and walked_key(key[len(self.prefix) :])

    def _lookup(self, key: str) -> dict[str, Any] | None:
        """The active note with this key, if any."""
        params = {"external_id_prefix": key, "limit": 1}
        items = self.remote.call("GET", "/v1/notes", params=params).json()["items"]
        return items[0] if items and items[0]["external_id"] == key else None

    def _pair(self, new: dict[str, Path], gone: dict[str, dict[str, Any]]) -> set[str]:
        """Move each gone note whose content a new file holds to that file's key; returns
        the keys moved away from."""
        if not new or not gone or len(gone) > MAX_PAIRED:
            return set()
        by_digest: dict[str, str] = {}
        for key, path in sorted(new.items()):
            digest = file_digest(path)
            if digest is not None:
                by_digest.setdefault(digest, key)
        moved: set[str] = set()
        for old, summary in sorted(gone.items()):
            digest = by_digest and self._content_digest(summary["id"])
            target = by_digest.pop(digest, None) if digest else None
            if target is None:
                continue
            body = {"external_id": target}
            resp = self.remote.call("PATCH", f"/v1/notes/{summary['id']}", json=body, fatal=False)
            if resp.status_code == 200:
                moved.add(old)
                self.counts["renamed"] += 1
                typer.echo(f"renamed      {old} -> {target} ({summary['id']})")
        return moved

    def _content_digest(self, note_id: str) -> str | None:
        resp = self.remote.call("GET", f"/v1/notes/{note_id}", fatal=False)
        return text_digest(resp.json()["content_md"]) if resp.status_code == 200 else None

    def _trash(self, key: str, note: dict[str, Any]) -> None:
        """Trash the note of a gone file, unless it changed since it was listed."""
        headers = {"If-Match": str(note["version"])}
        resp = self.remote.call("DELETE", f"/v1/notes/{note['id']}", headers=headers, fatal=False)
        if resp.status_code == 200:
            self.counts["trashed"] += 1
            typer.echo(f"trashed      {key} -> {note['id']} {note['title']!r}")
        elif resp.status_code == 412:
            typer.echo(f"kept         {key}: the note changed on the server since it was listed")
        elif resp.status_code != 404:
            self.uploader.fail(key, f"HTTP {resp.status_code}: {resp.text[:200]}")

    def summary(self) -> str:
        c, u = self.counts, self.uploader.counts
        return (
            f"{u['created']} created, {u['updated']} updated, {u['unchanged']} unchanged, "
            f"{c['renamed']} renamed, {c['trashed']} trashed, {u['failed']} failed"
        )


def relevant(folder: Path) -> Any:
    """A `watchfiles` filter: changes to supported files and to folders (names without an
    extension), outside hidden folders (`.obsidian`'s workspace changes all the time)."""

    def accept(_change: Change, raw: str) -> bool:
        key = file_key(Path(raw), folder)
        if key is None:
            return False
        path = PurePosixPath(key)
        if any(part.startswith(".") for part in path.parts):
            return False
        return not path.suffix or path.suffix.lower() in SUPPORTED_EXTENSIONS

    return accept
