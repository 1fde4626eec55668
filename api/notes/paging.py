"""Page positions of note listings (pure).

A listing is newest first by (created_at, _id), or, filtered by a key prefix, in key order.
Its cursor is "<created_at in ms since the epoch>-<note id>" or "k<the last key, UTF-8 in
unpadded base64url>". Every string matching CURSOR_PATTERN is a valid position (the schema
states the whole contract): negative and 15-digit times are positions (a legacy note may
date from before 1970 or up to 9999), and a key cursor is read leniently (a dangling
base64 character is dropped, bytes that are not UTF-8 read as U+FFFD).
"""

from __future__ import annotations

import base64
import re
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bson import ObjectId

from api.errors import BadRequest
from api.notes.stored import EPOCH, note_created_at

# 1024 characters of up to 4 UTF-8 bytes each, in base64 without padding.
_KEY_CHARS = 5462
CURSOR_PATTERN = rf"^(?:-?[0-9]{{1,15}}-[0-9a-f]{{24}}|k[A-Za-z0-9_-]{{1,{_KEY_CHARS}}})$"
_CURSOR = re.compile(CURSOR_PATTERN)
_FIRST, _LAST = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)
# Code points that are not characters of a valid string (UTF-16 surrogates).
_SURROGATES = range(0xD800, 0xE000)


@dataclass(frozen=True, slots=True)
class Position:
    """Where a page starts: after a (created_at, _id) or after a key; neither = the start."""

    created: tuple[datetime, ObjectId] | None = None
    key: str | None = None


def encode_cursor(doc: dict[str, Any], *, by_key: bool = False) -> str:
    """The cursor of the page after `doc` (the last item of a page)."""
    if by_key:
        raw = base64.urlsafe_b64encode(doc["external_id"].encode("utf-8"))
        return "k" + raw.decode("ascii").rstrip("=")
    created = note_created_at(doc)
    millis = (created - EPOCH) // timedelta(milliseconds=1)
    return f"{millis}-{doc['_id']}"


def decode_cursor(cursor: str) -> Position:
    """The position a cursor names (400 for a string outside CURSOR_PATTERN)."""
    if not _CURSOR.match(cursor):
        raise BadRequest("invalid cursor: pass next_cursor from a previous page unchanged")
    if cursor.startswith("k"):
        body = cursor[1:]
        body = body[: len(body) - 1] if len(body) % 4 == 1 else body
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        return Position(key=raw.decode("utf-8", "replace"))
    millis, oid = cursor.rsplit("-", 1)
    try:
        created = EPOCH + timedelta(milliseconds=int(millis))
    except OverflowError:  # past what a date can hold: before or after every note
        created = _FIRST if millis.startswith("-") else _LAST
    return Position(created=(created, ObjectId(oid)))


def prefix_end(prefix: str) -> str | None:
    """The first string after every string that starts with `prefix` (None: no bound).
    MongoDB compares strings by their UTF-8 bytes, which orders them as code points do."""
    chars = list(prefix)
    while chars:
        code = ord(chars.pop()) + 1
        if code in _SURROGATES:
            code = _SURROGATES.stop
        if code <= sys.maxunicode:
            return "".join(chars) + chr(code)
    return None


def key_range(prefix: str, after: str | None) -> dict[str, Any]:
    """The query on `external_id` of a key-ordered page: keys starting with `prefix`,
    after `after` when given."""
    bounds: dict[str, Any] = {"$gte": prefix}
    if after is not None and after >= prefix:
        bounds = {"$gt": after}
    end = prefix_end(prefix)
    if end is not None:
        bounds["$lt"] = end
    return bounds
