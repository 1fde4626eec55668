"""The import's multipart body, read strictly.

A field name, file name or text field that is not valid in the body's charset is a 400
(Starlette would decode it as Latin-1: `\\xff\\xfe` as the tag "ÿþ"); the parser and its
limits are otherwise Starlette's own.
"""

from __future__ import annotations

from contextlib import aclosing

from python_multipart.multipart import parse_options_header
from starlette.datastructures import FormData
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import ClientDisconnect, Request

from api.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType


class StrictMultiPartParser(MultiPartParser):
    """Starlette's parser, refusing text it would otherwise decode as Latin-1."""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self._current_part.content_disposition)
        for key, what in ((b"name", "a field name"), (b"filename", "a file name")):
            raw = options.get(key)
            if raw is not None:
                _check(raw, self._charset, what)
        super().on_headers_finished()

    def on_part_end(self) -> None:
        if self._current_part.file is None:
            name = self._current_part.field_name[:80]
            _check(self._current_part.data, self._charset, f"the field {name!r}")
        super().on_part_end()


def _check(raw: bytes | bytearray, charset: str, what: str) -> None:
    try:
        bytes(raw).decode(charset)
    except (UnicodeDecodeError, LookupError):
        raise MultiPartException(f"{what} is not valid {charset}") from None


async def read_multipart(request: Request, *, max_files: int, max_fields: int) -> FormData:
    """The request's multipart/form-data body (415 for another media type, 400 for a
    malformed body or text that is not valid in its charset)."""
    media_type, _ = parse_options_header(request.headers.get("content-type"))
    if media_type != b"multipart/form-data":
        raise UnsupportedMediaType("send the files as multipart/form-data")
    try:
        async with aclosing(request.stream()) as stream:
            parser = StrictMultiPartParser(
                request.headers, stream, max_files=max_files, max_fields=max_fields
            )
            return await parser.parse()
    except ClientDisconnect:
        # The client went away mid-body: a bad request, not a server error (no unhandled
        # 500 with a traceback). Nobody reads the answer.
        raise BadRequest("the request body ended early: the client disconnected") from None
    except MultiPartException as exc:
        if exc.message.startswith("Too many files"):
            # A limit on the request's size, not a malformed body: 413 tells a client to
            # send fewer files at a time (`autonote import` halves its batch on a 413).
            raise PayloadTooLarge(
                f"too many files in one request: at most {max_files} (AUTONOTE_MAX_IMPORT_FILES)"
            ) from None
        raise BadRequest(f"invalid multipart body: {exc.message}") from None
