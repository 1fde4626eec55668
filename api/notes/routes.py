"""Notes REST API (`/v1/notes`). Thin: parse, call `NotesService`, shape the response."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Header, Path, Query, Request, Response, status
from pydantic import ValidationError
from starlette.datastructures import FormData
from starlette.datastructures import UploadFile as StarletteUpload

from api.deps import ContainerDep, CurrentUser, NotesServiceDep
from api.errors import ValidationFailed
from api.notes.models import (
    ChunkList,
    ChunkOut,
    ImportedFile,
    ImportFailure,
    ImportOptions,
    ImportResult,
    NoteCreate,
    NoteList,
    NoteOut,
    NotePatch,
    NoteSummary,
)
from api.notes.multipart import read_multipart
from api.notes.service import CURSOR_PATTERN
from api.notes.stored import note_index_status
from api.notes.versioning import MAX_VERSION
from api.schemas import AUTHED, TEXT_PATTERN, errors

router = APIRouter(prefix="/v1/notes", tags=["notes"])

OBJECT_ID_PATTERN = r"^[0-9a-fA-F]{24}$"
_DIGITS = f"[0-9]{{1,{len(str(MAX_VERSION))}}}"
# A quote on one side only (`"1`) is no entity tag (it read as version 1; found by review).
IfMatch = Annotated[
    str,
    Header(
        description='Expected version, e.g. 3 (or "3"); * = any current version',
        pattern=rf'^(\*|(W/)?("{_DIGITS}"|{_DIGITS}))$',
    ),
]
NoteId = Annotated[str, Path(pattern=OBJECT_ID_PATTERN, description="Note id (24 hex digits)")]


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


# The multipart body is parsed in the handler, AFTER authentication (FastAPI would read a
# declared File/Form body before running the auth dependency): documented here instead.
IMPORT_BODY = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["files"],
                "additionalProperties": False,
                "properties": {
                    "files": {
                        "type": "array",
                        "minItems": 1,
                        "description": ".md .txt .html .docx .pdf files",
                        "items": {"type": "string", "contentMediaType": "application/octet-stream"},
                    },
                    "tags": {
                        "type": "array",
                        "items": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": 512,
                            "pattern": TEXT_PATTERN,
                        },
                        "description": "Tags added to every note",
                    },
                },
            }
        }
    },
}


def _import_parts(form: FormData) -> tuple[list[StarletteUpload], ImportOptions]:
    """The files and options of an import form; ValidationFailed (422) for an unknown
    field, a part of the wrong kind, no file, or an invalid tag."""
    unknown = sorted(set(form.keys()) - {"files", "tags"})
    if unknown:
        raise ValidationFailed(
            f"unknown multipart field {unknown[0][:80]!r}: expected `files` and `tags`"
        )
    parts, fields = form.getlist("files"), form.getlist("tags")
    files = [f for f in parts if isinstance(f, StarletteUpload)]
    tags = [t for t in fields if isinstance(t, str)]
    if len(files) != len(parts):
        raise ValidationFailed("`files` parts must be files (with a filename)")
    if len(tags) != len(fields):
        raise ValidationFailed("`tags` parts must be text fields, not files")
    if not files:
        raise ValidationFailed("send at least one file in the multipart field `files`")
    try:
        options = ImportOptions(tags=tags)
    except ValidationError as exc:
        raise ValidationFailed("; ".join(f"tags: {e['msg']}" for e in exc.errors())) from None
    return files, options


@router.post(
    "/import",
    response_model=ImportResult,
    responses=errors(*AUTHED),
    openapi_extra={"requestBody": IMPORT_BODY},
)
async def import_notes(
    request: Request,
    user: CurrentUser,
    container: ContainerDep,
) -> ImportResult:
    """Import files as notes (multipart). Markdown and text are stored as written; HTML and
    DOCX become markdown that keeps headings, GFM tables, lists, code and links (scripts,
    navigation, headers and footers dropped); PDF text is extracted. Title from front
    matter, the first H1, or the file name; tags from front matter, plus the `tags` fields
    for every note. Each file succeeds or fails on its own: failures are listed with a
    reason, the rest are imported. An unknown field or an invalid tag fails the whole
    request (422) before anything is stored. A user's import requests run one at a time
    (a second one waits, its body unread, until the first is done)."""
    settings = container.settings
    limit = settings.autonote_max_import_files
    async with container.imports.request_turn(user):
        form = await read_multipart(request, max_files=limit, max_fields=200)
        try:
            files, options = _import_parts(form)
            payload: list[tuple[str, bytes]] = []
            for upload in files:
                # One byte over is enough for the import to list the file as `too_large`
                # (each file succeeds or fails on its own); the rest is never read.
                data = await upload.read(settings.autonote_max_import_file_bytes + 1)
                payload.append((upload.filename or "untitled", data))
        finally:
            await form.close()
        report = await container.imports.import_files(
            user, payload, extra_tags=options.tags, abandoned=request.is_disconnected
        )
    return ImportResult(
        imported=[
            ImportedFile(filename=f, note=NoteSummary.from_doc(d), warnings=w)
            for f, d, w in report.imported
        ],
        errors=[ImportFailure(filename=f, error=c, detail=d) for f, c, d in report.errors],
    )


@router.get("", response_model=NoteList, responses=errors(400, *AUTHED))
async def list_notes(
    user: CurrentUser,
    notes: NotesServiceDep,
    status_: Annotated[Literal["active", "trashed"], Query(alias="status")] = "active",
    tag: Annotated[str, Query(min_length=1, max_length=512)] = None,  # noqa: RUF013
    cursor: Annotated[str, Query(pattern=CURSOR_PATTERN, max_length=42)] = None,  # noqa: RUF013
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> NoteList:
    """List your notes, newest first, one page at a time (no bodies). Filter by `tag` and
    `status`; pass the returned `next_cursor` as `cursor` to get the next page."""
    docs, next_cursor = await notes.list(user, status=status_, tag=tag, cursor=cursor, limit=limit)
    return NoteList(items=[NoteSummary.from_doc(d) for d in docs], next_cursor=next_cursor)


@router.get("/{note_id}", response_model=NoteOut, responses=errors(400, 404, *AUTHED))
async def get_note(
    note_id: NoteId, user: CurrentUser, notes: NotesServiceDep, response: Response
) -> NoteOut:
    """Fetch one note with its indexing state. The `ETag` header is its version."""
    return _with_etag(response, await notes.get(user, note_id))


@router.patch("/{note_id}", response_model=NoteOut, responses=errors(400, 404, 412, 413, *AUTHED))
async def update_note(
    note_id: NoteId,
    body: NotePatch,
    user: CurrentUser,
    notes: NotesServiceDep,
    response: Response,
    if_match: IfMatch = None,  # optional, but never null in the schema
) -> NoteOut:
    """Change some of title, content_md, tags. `version` goes up by one only when one of
    them actually changes (then the note is re-indexed; unchanged chunks keep their
    embeddings). With `If-Match: <version>` the update applies only to that version, else
    412."""
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
    # Exactly "true" or "false": read as a loose boolean, `?permanent=yes`, `1` or `on`
    # purged a note for good (found by review); a destructive flag takes no synonyms.
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
