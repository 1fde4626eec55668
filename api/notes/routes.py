"""Notes REST API (`/v1/notes`). Thin: parse, call `NotesService`, shape the response."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response, status

from api.notes.paging import CURSOR_PATTERN
from api.notes.schemas import (
    EXTERNAL_ID_MAX_CHARS,
    ChunkList,
    ChunkOut,
    NoteCreate,
    NoteList,
    NoteOut,
    NotePatch,
    NoteSummary,
    NoteUpsert,
)
from api.notes.service import NotesService
from api.notes.stored import note_index_status
from api.notes.versioning import MAX_VERSION
from api.schemas import AUTHED, CONTROL, OBJECT_ID_PATTERN, errors
from api.users.auth import CurrentUser

router = APIRouter(prefix="/v1/notes", tags=["notes"])


def get_notes_service(request: Request) -> NotesService:
    return request.app.state.container.notes


NotesServiceDep = Annotated[NotesService, Depends(get_notes_service)]

_DIGITS = f"[0-9]{{1,{len(str(MAX_VERSION))}}}"
# A quote on one side only (`"1`) is no entity tag, and no version either.
IfMatch = Annotated[
    str,
    Header(
        description='Expected version, e.g. 3 (or "3"); * = any current version',
        pattern=rf'^(\*|(W/)?("{_DIGITS}"|{_DIGITS}))$',
    ),
]
NoteId = Annotated[str, Path(pattern=OBJECT_ID_PATTERN, description="Note id (24 hex digits)")]
# Lengths are bounded by the patterns alone: a maxLength makes schema-driven clients probe
# with URLs longer than an HTTP server reads (a 1024-character prefix of 4-byte characters
# is 12 KB percent-encoded).
KeyPrefix = Annotated[
    str,
    Query(
        pattern=f"^[^{CONTROL}]{{0,{EXTERNAL_ID_MAX_CHARS}}}$",
        description='Only notes whose key starts with this (e.g. "projects/"; "" = every note '
        "with a key), in key order",
    ),
]
Cursor = Annotated[str, Query(pattern=CURSOR_PATTERN)]


def _with_etag(response: Response, doc: dict) -> NoteOut:
    note = NoteOut.from_doc(doc)
    response.headers["ETag"] = f'"{note.version}"'
    return note


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=NoteOut,
    responses=errors(400, 413, *AUTHED),
)
async def create_note(
    body: NoteCreate, user: CurrentUser, notes: NotesServiceDep, response: Response
) -> NoteOut:
    """Create a note (version 1). It is queued for chunking and embedding at once
    (`index_status: pending`); with `CHUNKING_ASYNC=false` it is indexed before this returns."""
    doc = await notes.create(user, body)
    response.headers["Location"] = f"/v1/notes/{doc['_id']}"
    return _with_etag(response, doc)


@router.put(
    "/by-external-id",
    response_model=NoteOut,
    responses={
        201: {"model": NoteOut, "description": "Created: the key was new"},
        **errors(409, 413, *AUTHED),
    },
)
async def upsert_note(
    body: NoteUpsert, user: CurrentUser, notes: NotesServiceDep, response: Response
) -> NoteOut:
    """Create or update your note with key `external_id` (201 when created, 200 when
    updated or already as sent). Title, content and tags are replaced (tags omitted =
    none); a trashed note with the key is restored. Sending what the note already holds
    changes nothing: same version, same `updated_at`, nothing re-embedded. Keys are yours
    alone: another user's note with the same key is never touched."""
    result = await notes.upsert(user, body)
    if result.outcome == "created":
        response.status_code = status.HTTP_201_CREATED
        response.headers["Location"] = f"/v1/notes/{result.doc['_id']}"
    return _with_etag(response, result.doc)


@router.get("", response_model=NoteList, responses=errors(400, *AUTHED))
async def list_notes(
    user: CurrentUser,
    notes: NotesServiceDep,
    status_: Annotated[Literal["active", "trashed"], Query(alias="status")] = "active",
    tag: Annotated[str, Query(min_length=1, max_length=512)] = None,  # noqa: RUF013
    external_id_prefix: KeyPrefix = None,
    cursor: Cursor = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> NoteList:
    """List your notes, newest first, one page at a time (no bodies). Filter by `tag` and
    `status`; with `external_id_prefix`, the notes whose key starts with it, in key order.
    Pass the returned `next_cursor` as `cursor` to get the next page."""
    docs, next_cursor = await notes.list(
        user,
        status=status_,
        tag=tag,
        cursor=cursor,
        limit=limit,
        external_id_prefix=external_id_prefix,
    )
    return NoteList(items=[NoteSummary.from_doc(d) for d in docs], next_cursor=next_cursor)


@router.get("/{note_id}", response_model=NoteOut, responses=errors(400, 404, *AUTHED))
async def get_note(
    note_id: NoteId, user: CurrentUser, notes: NotesServiceDep, response: Response
) -> NoteOut:
    """Fetch one note with its indexing state. The `ETag` header is its version."""
    return _with_etag(response, await notes.get(user, note_id))


@router.patch(
    "/{note_id}", response_model=NoteOut, responses=errors(400, 404, 409, 412, 413, *AUTHED)
)
async def update_note(
    note_id: NoteId,
    body: NotePatch,
    user: CurrentUser,
    notes: NotesServiceDep,
    response: Response,
    if_match: IfMatch = None,  # optional, but never null in the schema
) -> NoteOut:
    """Change some of title, content_md, tags, external_id. `version` goes up by one only
    when the title, content or tags actually change (then the note is re-indexed; unchanged
    chunks keep their embeddings); a new `external_id` alone is no new version, and one
    another of your notes has is a 409. With `If-Match: <version>` the update applies only
    to that version, else 412."""
    return _with_etag(response, await notes.patch(user, note_id, body, if_match))


@router.delete(
    "/{note_id}",
    response_model=NoteOut,
    responses={
        204: {"description": "Permanently deleted"},
        **errors(400, 404, 409, 412, *AUTHED),
    },
)
async def delete_note(
    note_id: NoteId,
    user: CurrentUser,
    notes: NotesServiceDep,
    response: Response,
    # Exactly "true" or "false": a destructive flag takes no synonyms (`?permanent=yes`, `1`
    # or `on` is a 422, not a purge).
    permanent: Annotated[
        Literal["true", "false"], Query(description="`true`: purge the note and its chunks")
    ] = "false",
    if_match: IfMatch = None,  # optional, but never null in the schema
) -> NoteOut | Response:
    """Move a note to the trash (its chunks leave the search index; restore brings them
    back without re-embedding). `?permanent=true` deletes it for good (204). With
    `If-Match: <version>` it applies only to that version, else 412."""
    if permanent == "true":
        await notes.purge(user, note_id, if_match)
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    return _with_etag(response, await notes.trash(user, note_id, if_match))


@router.post(
    "/{note_id}/restore", response_model=NoteOut, responses=errors(400, 404, 409, 412, *AUTHED)
)
async def restore_note(
    note_id: NoteId,
    user: CurrentUser,
    notes: NotesServiceDep,
    response: Response,
    if_match: IfMatch = None,  # optional, but never null in the schema
) -> NoteOut:
    """Bring a trashed note back (idempotent for an active note). With
    `If-Match: <version>` it applies only to that version, else 412."""
    return _with_etag(response, await notes.restore(user, note_id, if_match))


@router.post(
    "/{note_id}/reindex",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=NoteOut,
    responses=errors(400, 404, *AUTHED),
)
async def reindex_note(
    note_id: NoteId, user: CurrentUser, notes: NotesServiceDep, response: Response
) -> NoteOut:
    """Queue the note for chunking and embedding again — also a `failed` one, with a fresh
    attempt budget. Unchanged chunks reuse their embeddings."""
    return _with_etag(response, await notes.reindex(user, note_id))


@router.get("/{note_id}/chunks", response_model=ChunkList, responses=errors(400, 404, *AUTHED))
async def list_chunks(note_id: NoteId, user: CurrentUser, notes: NotesServiceDep) -> ChunkList:
    """The note's current chunks in order — heading breadcrumb, type, exact character
    offsets into `content_md`, token counts — as search sees them (no vectors)."""
    doc, chunks = await notes.chunks(user, note_id)
    return ChunkList(
        note_id=str(doc["_id"]),
        indexed_version=doc.get("indexed_version"),
        index_status=note_index_status(doc),
        items=[ChunkOut.from_doc(c) for c in chunks],
    )
