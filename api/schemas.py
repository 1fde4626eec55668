"""Schemas shared by every route: the error body and the documented error responses."""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, StringConstraints

# Patterns are checked twice: by pydantic (Rust regex, where \s is Unicode White_Space) and
# by every client that reads the OpenAPI schema (ECMAScript regex, where \s is a different
# set: no U+0085, but U+FEFF). Spelling whitespace out makes both agree on every character.
WHITESPACE = (
    r"\t\n\u000b\u000c\r\u001c-\u001f \u0085\u00a0\u1680"
    r"\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
# C0, DEL and C1 controls, the line and paragraph separators (NEL, U+2028, U+2029) and the
# bidi embeddings, overrides and isolates (U+202A-202E, U+2066-2069), which reorder what
# follows them on screen: what "no control characters or line breaks" promises.
CONTROL = r"\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069"
# Characters that show nothing alone (format and bidi controls, joiners, variation
# selectors, fillers): a title of only U+200B is not "visible".
INVISIBLE = (
    r"\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    r"\u202a-\u202e\u2060-\u206f\u2800\u3164\ufe00-\ufe0f\uffa0"
)
NON_BLANK = rf"[^{WHITESPACE}]"  # patterns are unanchored: "contains a visible character"
# A single line: no control characters, at least one visible character.
TEXT_PATTERN = rf"^[^{CONTROL}]*[^{WHITESPACE}{CONTROL}{INVISIBLE}][^{CONTROL}]*$"
CONTROL_CHARS = re.compile(f"[{CONTROL}]")


def name_key(name: str) -> str:
    """What makes two user names the same name: equal after NFKC and case folding."""
    return unicodedata.normalize("NFKC", name).casefold()


# A tag as every route accepts it (notes, search and chat filters, import); the configured
# count and length limits are the notes service's.
TAG_MAX_CHARS = 512
Tag = Annotated[
    str, StringConstraints(min_length=1, max_length=TAG_MAX_CHARS, pattern=TEXT_PATTERN)
]
# A tag to filter by: any tag a note may hold, also one stored before C1 controls and the
# line separators were refused, so such a tag can still be filtered on. C0 controls were
# never accepted in a tag. Matching is exact.
_C0 = r"\u0000-\u001f\u007f"
FilterTag = Annotated[
    str,
    StringConstraints(
        min_length=1,
        max_length=TAG_MAX_CHARS,
        pattern=rf"^[^{_C0}]*[^{WHITESPACE}{_C0}][^{_C0}]*$",
    ),
]

OBJECT_ID_PATTERN = r"^[0-9a-fA-F]{24}$"


def utf8_clean(value: str, field: str) -> str:
    """`value` unchanged, or ValueError if it holds a lone surrogate: JSON allows "\\ud800",
    which cannot be stored as UTF-8 BSON."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{field} is not valid Unicode (lone surrogate)") from None
    return value


def clean_tags(tags: list[str]) -> list[str]:
    """Check every tag (valid Unicode, not blank, no control characters); returned as sent,
    so limits apply to what the client sent and `normalize_tags` trims afterwards."""
    for tag in tags:
        tag = utf8_clean(tag, "tag").strip()
        if not tag:
            raise ValueError("tags must not be empty or blank")
        if CONTROL_CHARS.search(tag):
            raise ValueError("tags must not contain control characters")
    return tags


def normalize_tags(tags: list[str]) -> list[str]:
    """Tags as stored: trimmed, duplicates dropped, first occurrence's order kept."""
    return list(dict.fromkeys(tag.strip() for tag in tags))


def _json_integer(value: object) -> object:
    """Reject strings and booleans where the schema says integer: pydantic's lax mode reads
    "5" and true as numbers, which no client following the documented schema sends."""
    if isinstance(value, str | bool):
        raise ValueError("expected a JSON integer")
    return value


# A request-body integer as the schema documents it (5 or 5.0, never "5" or true).
JsonInt = Annotated[int, BeforeValidator(_json_integer)]


class ErrorBody(BaseModel):
    """Every error response: a stable machine-readable code and a human-readable detail."""

    error: str = Field(examples=["not_found"])
    detail: Any = Field(examples=["note not found"])


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for the given error statuses."""
    described = {
        # Ids, cursors and headers are schema patterns, so a bad one is a 422, not a 400.
        400: "Malformed body (invalid JSON or multipart, a client gone mid-upload)",
        401: "Missing, malformed, unknown or revoked API key (admin routes: wrong admin token)",
        403: "Forbidden (admin API disabled)",
        404: "Not found (another user's note is reported as not found)",
        409: "Conflict: the note kept changing under concurrent requests (retry), or another "
        "of your notes has that external_id",
        412: "If-Match version does not match",
        413: "Body or note content over the configured limit",
        415: "A JSON body sent as another media type (Content-Type)",
        422: "Validation error: body, path id, query parameter (cursor, …) or header",
        429: "Rate limited (per API key; admin routes: per client, after wrong tokens); "
        "see Retry-After",
        503: "Database unavailable; retry after Retry-After",
    }
    return {s: {"model": ErrorBody, "description": described[s]} for s in statuses}


AUTHED = (400, 401, 413, 415, 422, 429, 503)
ADMIN = (400, 401, 403, 413, 415, 422, 429, 503)
