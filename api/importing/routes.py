"""The import route (`POST /v1/notes/import`). Thin: read the multipart body, call
`ImportService`, shape the response."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from pydantic import ValidationError
from starlette.datastructures import FormData
from starlette.datastructures import UploadFile as StarletteUpload

from api.errors import ValidationFailed
from api.importing.multipart import read_multipart
from api.importing.schemas import ImportedFile, ImportFailure, ImportOptions, ImportResult
from api.importing.service import ImportService
from api.notes.schemas import NoteSummary
from api.schemas import AUTHED, TEXT_PATTERN, errors
from api.users.auth import CurrentUser

router = APIRouter(prefix="/v1/notes", tags=["notes"])


def get_import_service(request: Request) -> ImportService:
    return request.app.state.container.imports


ImportServiceDep = Annotated[ImportService, Depends(get_import_service)]


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
                    "key_by": {
                        "type": "string",
                        "enum": ["filename"],
                        "description": "`filename`: each file's name (a path such as "
                        "`daily/monday.md`, at most 1024 characters) is its note's "
                        "external_id, and the file creates or updates your note with that key "
                        "as PUT /v1/notes/by-external-id does",
                    },
                },
            }
        }
    },
}


_FIELDS = ("files", "tags", "key_by")


def _texts(form: FormData, name: str) -> list[str]:
    parts = form.getlist(name)
    texts = [t for t in parts if isinstance(t, str)]
    if len(texts) != len(parts):
        raise ValidationFailed(f"`{name}` parts must be text fields, not files")
    return texts


def _import_parts(form: FormData) -> tuple[list[StarletteUpload], ImportOptions]:
    """The files and options of an import form; ValidationFailed (422) for an unknown
    field, a part of the wrong kind, no file, an invalid tag or `key_by`."""
    unknown = sorted(set(form.keys()) - set(_FIELDS))
    if unknown:
        raise ValidationFailed(
            f"unknown multipart field {unknown[0][:80]!r}: expected `files`, `tags` and `key_by`"
        )
    parts = form.getlist("files")
    files = [f for f in parts if isinstance(f, StarletteUpload)]
    if len(files) != len(parts):
        raise ValidationFailed("`files` parts must be files (with a filename)")
    tags, key_by = _texts(form, "tags"), _texts(form, "key_by")
    if not files:
        raise ValidationFailed("send at least one file in the multipart field `files`")
    if len(key_by) > 1:
        raise ValidationFailed("send `key_by` once")
    try:
        options = ImportOptions(tags=tags, key_by=key_by[0] if key_by else None)
    except ValidationError as exc:
        raise ValidationFailed(
            "; ".join(f"{e['loc'][0]}: {e['msg']}" for e in exc.errors())
        ) from None
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
    imports: ImportServiceDep,
) -> ImportResult:
    """Import files as notes (multipart). Markdown and text are stored as written; HTML and
    DOCX become markdown that keeps headings, GFM tables, lists, code and links (scripts,
    navigation, headers and footers dropped); PDF text is extracted. Title from front
    matter, the first H1, or the file name; tags from front matter, plus the `tags` fields
    for every note. With `key_by=filename`, each file's name (a path) is its note's key:
    the file creates or updates your note with that external_id, and a file holding what
    its note holds changes nothing. Each file succeeds or fails on its own (also on a name
    that is no valid key): failures are listed with a reason, the rest are imported. An
    unknown field, an invalid tag or `key_by` fails the whole request (422) before anything
    is stored. A user's import requests run one at a time (a second one waits, its body
    unread, until the first is done)."""
    async with imports.request_turn(user):
        form = await read_multipart(request, max_files=imports.max_files, max_fields=200)
        try:
            files, options = _import_parts(form)
            payload: list[tuple[str, bytes]] = []
            for upload in files:
                # One byte over is enough for the import to list the file as `too_large`
                # (each file succeeds or fails on its own); the rest is never read.
                data = await upload.read(imports.max_file_bytes + 1)
                payload.append((upload.filename or "untitled", data))
        finally:
            await form.close()
        report = await imports.import_files(
            user,
            payload,
            extra_tags=options.tags,
            key_by_filename=options.key_by == "filename",
            abandoned=request.is_disconnected,
        )
    return ImportResult(
        imported=[
            ImportedFile(filename=f, note=NoteSummary.from_doc(d), warnings=w, outcome=o)
            for f, d, w, o in report.imported
        ],
        errors=[ImportFailure(filename=f, error=c, detail=d) for f, c, d in report.errors],
    )
