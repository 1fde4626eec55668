"""Importing files as notes: each file is converted (api.importing, under the time and
memory budget of `ConversionSandbox`, from a worker thread) and stored through
`NotesService.create`, so imported notes are validated and indexed exactly like any other.
One bad file never stops the others, and one user's files never hold up another's: a user
converts one file at a time, within the process-wide limit."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import structlog
from pydantic import ValidationError

from api.errors import DomainError
from api.importing import ImportFileError, convert_file
from api.importing.sandbox import ConversionSandbox
from api.importing.types import ImportedNote, ImportReport
from api.notes.schemas import NoteCreate, NoteUpsert
from api.notes.service import NotesService
from api.notes.types import NoteTimes, Upserted
from api.schemas import CONTROL, TEXT_PATTERN, normalize_tags
from api.users.types import User

log = structlog.get_logger(__name__)

_CONTROL = re.compile(f"[{CONTROL}]+")
_VALID_TEXT = re.compile(TEXT_PATTERN)


def one_line(text: str, limit: int) -> str | None:
    """A title or tag the importer derived (a heading, a file name, front matter) as the
    API accepts one: control characters (NUL or DEL in a heading, a tab in a file name)
    become spaces, whitespace is collapsed, at most `limit` characters; None if nothing
    visible is left. The file's author never typed it as a title, so it is cleaned rather
    than failing the file."""
    cleaned = " ".join(_CONTROL.sub(" ", text).split())[:limit].rstrip()
    return cleaned if _VALID_TEXT.match(cleaned) else None


class ImportService:
    def __init__(
        self,
        notes: NotesService,
        *,
        max_file_bytes: int,
        sandbox: ConversionSandbox,
        max_files: int = 200,
        concurrency: int = 2,
    ) -> None:
        self._notes = notes
        self.max_file_bytes = max_file_bytes
        self.max_files = max_files
        self._sandbox = sandbox
        self._gate = asyncio.Semaphore(concurrency)
        self._converting: set[str] = set()  # users with a conversion running
        self._importing: set[str] = set()  # users with an import request being read or run
        self._turn = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def request_turn(self, user: User) -> AsyncIterator[None]:
        """One import request per user at a time, taken before its body is read: the files
        of a request are held in memory while they wait for conversion, so a user's
        concurrent uploads would add up. Later requests wait with their bodies unread
        (tests/importing/test_import_api.py)."""
        async with self._one_per_user(self._importing, user):
            yield

    @contextlib.asynccontextmanager
    async def _one_per_user(self, busy: set[str], user: User) -> AsyncIterator[None]:
        """Wait until `user` is not in `busy`, then hold the place until the block ends."""
        uid = str(user.id)
        async with self._turn:
            await self._turn.wait_for(lambda: uid not in busy)
            busy.add(uid)
        try:
            yield
        finally:
            async with self._turn:
                busy.discard(uid)
                self._turn.notify_all()

    async def _convert(self, user: User, filename: str, data: bytes) -> Any:
        """One conversion of `user` at a time, at most `concurrency` in all: a user
        uploading costly files waits for their own, not everyone's, turn."""
        async with self._one_per_user(self._converting, user), self._gate:
            limit = self.max_file_bytes
            if not self._sandbox.isolated(filename, data, limit):
                return await asyncio.to_thread(convert_file, filename, data, max_bytes=limit)
            job = await asyncio.to_thread(self._sandbox.start, filename, data, max_bytes=limit)
            try:
                return await asyncio.to_thread(job.wait)
            except asyncio.CancelledError:
                # The request is gone (server stopping, client away): the child goes too,
                # before the slots are given back (the thread returns at once).
                job.kill()
                raise

    def _tags(self, derived: list[str], extra: list[str]) -> tuple[list[str], list[str]]:
        """The note's tags: those the file carries (front matter, `#tags`), cleaned and cut
        to the configured length, as many as fit beside the request's own `tags`, which
        are always kept (they were checked against the limits already). A file with too
        many or too long tags of its own is imported, not failed, with a warning for each
        change."""
        max_tags, max_length = self._notes.tag_limits
        kept = normalize_tags(extra)  # compared as stored (trimmed)
        warnings: list[str] = []
        cut = [t for t in derived if len(" ".join(t.split())) > max_length]
        if cut:
            warnings.append(
                f"{len(cut)} tag(s) cut to {max_length} characters (AUTONOTE_MAX_TAG_LENGTH): "
                + ", ".join(repr(t[:40] + "…") for t in cut[:3])
            )
        own = [t for t in dict.fromkeys(one_line(t, max_length) for t in derived) if t]
        own = [t for t in own if t not in kept]
        room = max(0, max_tags - len(kept))
        if len(own) > room:
            dropped = own[room:]
            warnings.append(
                f"{len(dropped)} of the file's tags dropped: at most {max_tags} tags per note "
                f"(AUTONOTE_MAX_TAGS): " + ", ".join(repr(t) for t in dropped[:5])
            )
        return [*own[:room], *kept], warnings

    async def _store(
        self, user: User, filename: str, note: ImportedNote, tags: list[str], key: str | None
    ) -> Upserted:
        """Create the note, or with a key create or update the user's note with that key."""
        title = one_line(note.title, 500) or one_line(filename, 500) or "untitled"
        times = NoteTimes(created_at=note.created_at, updated_at=note.updated_at)
        if key is None:
            body = NoteCreate(title=title, content_md=note.content_md, tags=tags)
            return Upserted(await self._notes.create(user, body, times), "created")
        keyed = NoteUpsert(external_id=key, title=title, content_md=note.content_md, tags=tags)
        return await self._notes.upsert(user, keyed, times)

    async def import_files(
        self,
        user: User,
        files: list[tuple[str, bytes]],
        extra_tags: list[str] | None = None,
        *,
        key_by_filename: bool = False,
        abandoned: Callable[[], Awaitable[bool]] | None = None,
    ) -> ImportReport:
        """Convert and store each file (with `key_by_filename`: upsert by its name as the
        key; a name that is no valid key fails that file); per-file errors are collected,
        not raised. Tags for every note are checked first: bad ones
        fail the whole request (ValidationFailed), before any note is written.
        `abandoned()` is asked before each file: once the client has gone, the files left
        are not converted (a dropped upload of many costly files would hold its user's
        turn for their whole conversion)."""
        if extra_tags:
            self._notes.check_tags(extra_tags)
        report = ImportReport()
        for index, (filename, data) in enumerate(files):
            if abandoned is not None and await abandoned():
                log.info("notes.import_abandoned", done=index, left=len(files) - index)
                break
            try:
                converted = await self._convert(user, filename, data)
                tags, warnings = self._tags(converted.tags, extra_tags or [])
                key = filename if key_by_filename else None
                stored = await self._store(user, filename, converted, tags, key)
            except ImportFileError as exc:
                report.errors.append((filename, exc.code, exc.detail))
                continue
            except ValidationError as exc:
                detail = "; ".join(e["msg"] for e in exc.errors())
                report.errors.append((filename, "validation_error", detail))
                continue
            except DomainError as exc:
                report.errors.append((filename, exc.code, str(exc.detail)))
                continue
            report.imported.append((filename, stored.doc, warnings, stored.outcome))
        log.info(
            "notes.imported",
            files=len(files),
            imported=len(report.imported),
            failed=len(report.errors),
        )
        return report
