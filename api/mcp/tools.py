"""The MCP tools: what each one takes (the REST API's request models where one exists),
what it returns, and how it calls the services, always for one authenticated user."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from api.chat.schemas import ChatResponse
from api.chat.service import ChatService, result_dict
from api.errors import Conflict, PreconditionFailed, ValidationFailed
from api.mcp.schemas import (
    AppendArgs,
    Appended,
    AskArgs,
    GetNoteArgs,
    ListNotesArgs,
    NoteText,
)
from api.notes.schemas import NoteCreate, NoteList, NotePatch, NoteSummary
from api.notes.service import NotesService
from api.notes.stored import note_content, note_status
from api.retrieval.schemas import SearchRequest, SearchResponse
from api.retrieval.service import RetrievalService
from api.users.types import User


@dataclass(frozen=True, slots=True)
class Services:
    """The services every tool reaches (the app's `Container` holds them)."""

    notes: NotesService
    search: RetrievalService
    chat: ChatService


Run = Callable[[Services, User, Any], Awaitable[BaseModel]]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    title: str
    description: str
    args: type[BaseModel]
    result: type[BaseModel]
    run: Run
    writes: bool = False


async def search_notes(s: Services, user: User, args: SearchRequest) -> SearchResponse:
    outcome = await s.search.search(user.id, args.query, **args.options())
    return SearchResponse.from_outcome(outcome)


async def get_note(s: Services, user: User, args: GetNoteArgs) -> NoteText:
    doc = await s.notes.get(user, args.note_id)
    summary = NoteSummary.from_doc(doc)
    content = note_content(doc)
    start, end = span(args.start_offset, args.end_offset, len(content))
    return NoteText(
        **summary.model_dump(include=set(NoteText.model_fields)),
        content_md=content[start:end],
        start_offset=start,
        end_offset=end,
        length=len(content),
    )


def span(start: int | None, end: int | None, length: int) -> tuple[int, int]:
    """The offsets asked for, within a note of `length` characters (ValidationFailed
    otherwise); an omitted one is the note's start or end."""
    start = 0 if start is None else start
    end = length if end is None else end
    if end > length:
        raise ValidationFailed(f"end_offset {end} is past the end of the note ({length} chars)")
    if start > end or (start == end and length > 0):
        raise ValidationFailed(f"start_offset {start} must be before end_offset {end}")
    return start, end


async def ask(s: Services, user: User, args: AskArgs) -> ChatResponse:
    history = [{"role": m.role, "content": m.content} for m in args.history]
    filters = args.filters.to_filters() if args.filters else None
    result = await s.chat.answer(user.id, args.question, history, filters)
    return ChatResponse(**result_dict(result))


async def list_recent_notes(s: Services, user: User, args: ListNotesArgs) -> NoteList:
    docs, cursor = await s.notes.list(
        user, status="active", tag=args.tag, cursor=args.cursor, limit=args.limit
    )
    return NoteList(items=[NoteSummary.from_doc(d) for d in docs], next_cursor=cursor)


async def create_note(s: Services, user: User, args: NoteCreate) -> NoteSummary:
    return NoteSummary.from_doc(await s.notes.create(user, args))


APPEND_ATTEMPTS = 5


async def append_to_note(s: Services, user: User, args: AppendArgs) -> Appended:
    """Add `text` after a blank line. The write is conditional on the version read, so a
    concurrent edit is never overwritten: it is read again (or, with `expected_version`,
    refused)."""
    for _ in range(APPEND_ATTEMPTS):
        doc = await s.notes.get(user, args.note_id)
        if note_status(doc) != "active":
            raise Conflict("the note is in the trash; restore it before appending")
        version = int(doc["version"])
        if args.expected_version is not None and args.expected_version != version:
            raise PreconditionFailed(
                f"expected_version {args.expected_version} does not match current version {version}"
            )
        content = note_content(doc)
        start = len(content) + len(separator(content))
        patch = NotePatch(content_md=content + separator(content) + args.text)
        try:
            updated = await s.notes.patch(user, args.note_id, patch, str(version))
        except PreconditionFailed:
            if args.expected_version is not None:
                raise
            continue
        summary = NoteSummary.from_doc(updated)
        return Appended(
            id=summary.id,
            version=summary.version,
            index_status=summary.index_status,
            start_offset=start,
            end_offset=start + len(args.text),
        )
    raise PreconditionFailed("the note keeps changing; retry")


def separator(content: str) -> str:
    """What goes between a note and appended text: a blank line (none after nothing)."""
    if not content or content.endswith("\n\n"):
        return ""
    return "\n" if content.endswith("\n") else "\n\n"


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "search_notes",
        "Search notes",
        "Hybrid (semantic + keyword) search over your notes. Returns notes ranked by score, "
        "each with its matching sections: heading path, the section text, its character "
        "offsets in the note (start_offset, end_offset: open them with get_note) and score.",
        SearchRequest,
        SearchResponse,
        search_notes,
    ),
    ToolSpec(
        "get_note",
        "Read a note",
        "A note's markdown and metadata: the whole note, or only the section between "
        "start_offset and end_offset (character offsets from search_notes or ask).",
        GetNoteArgs,
        NoteText,
        get_note,
    ),
    ToolSpec(
        "ask",
        "Ask your notes",
        "Answer a question from your notes only. The answer cites sections as [1], [2], …; "
        "`citations` gives each one's note id, title, heading path and character offsets. "
        "Without a configured chat model the answer quotes the best passages (mode "
        "'extractive').",
        AskArgs,
        ChatResponse,
        ask,
    ),
    ToolSpec(
        "list_recent_notes",
        "List recent notes",
        "Your notes, most recently created first: id, title, tags, version, index status "
        "(not their text). Pass next_cursor as cursor for the next page.",
        ListNotesArgs,
        NoteList,
        list_recent_notes,
    ),
    ToolSpec(
        "create_note",
        "Create a note",
        "Store a new markdown note (title, content_md, tags). It is indexed for search "
        "shortly after (index_status 'pending', then 'indexed').",
        NoteCreate,
        NoteSummary,
        create_note,
        writes=True,
    ),
    ToolSpec(
        "append_to_note",
        "Append to a note",
        "Add markdown at the end of one of your notes, after a blank line. Returns the new "
        "version and the offsets of the added text.",
        AppendArgs,
        Appended,
        append_to_note,
        writes=True,
    ),
)
