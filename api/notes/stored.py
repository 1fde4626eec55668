"""Note documents as they may be stored, read into the shape the rest of the code expects.

The API writes one shape, but the migration exists for databases an older app (or a person)
wrote: a `created_at` string, `tags: "ops"`, a dict among the tags, `title: null`, no
`status`. Every reader of a stored note's fields goes through these functions, so such a
note lists, loads into search and reads like any other; what cannot be read as text makes
the note unindexable with a reason (`unindexable_reason`), never a crash. Pure: no I/O.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from bson import Decimal128, Int64, ObjectId

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Epoch milliseconds a date can hold (years 1 to 9999), here and in the migration's $convert.
FIRST_MS, LAST_MS = -62_135_596_800_000, 253_402_300_799_999
# ISO strings are read only with a four-digit year from 0001 (the server's parser reads
# "10000-01-01" as 2000), and only when the time, its offset applied, is within what a date
# holds. The migration's $convert applies the same rules.
STRING_YEAR = re.compile(r"^\s*(?!0000)[0-9]{4}-")


def as_text(value: Any) -> str | None:
    """A stored text field: a string as is, a missing one as "", a number as written;
    None for anything else (a list, a dict, binary, a boolean)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def note_title(doc: dict[str, Any]) -> str:
    """The note's title ("" when it cannot be read as text)."""
    return as_text(doc.get("title")) or ""


def note_content(doc: dict[str, Any]) -> str:
    """The note's markdown ("" when it cannot be read as text: see `unindexable_reason`)."""
    return as_text(doc.get("content_md")) or ""


def note_tags(doc: dict[str, Any]) -> list[str]:
    """The note's tags as a list of strings: a lone string is one tag (not its letters),
    numbers are written out, anything else in the list is left out, duplicates once."""
    value = doc.get("tags")
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        return []
    tags: list[str] = []
    for item in items:
        text = as_text(item) if item is not None else None
        if text and text not in tags:
            tags.append(text)
    return tags


def note_external_id(doc: dict[str, Any]) -> str | None:
    """The note's key (`external_id`), None when it has none."""
    value = doc.get("external_id")
    return value if isinstance(value, str) else None


# `note_status` as a query: a note without `status` is active, one with a value this app
# never wrote ("archived") is trashed, so legacy notes are in listings and search and can
# be trashed like any other.
STATUS_QUERY: dict[str, dict[str, list[Any]]] = {
    "active": {"$in": ["active", None]},
    "trashed": {"$nin": ["active", None]},
}
# What a listing matches: point bounds, so the (author_id, status, created_at) index gives
# the order (`$nin` is a range: every trashed note would be fetched and sorted for each
# page). A foreign status is listed once the migration stored it as "trashed".
LISTED_STATUS: dict[str, Any] = {"active": STATUS_QUERY["active"], "trashed": "trashed"}


def note_status(doc: dict[str, Any]) -> Literal["active", "trashed"]:
    """`active` when the status is "active" or missing (older documents had none); any other
    value (`trashed`, or one this app never wrote, such as "archived") is not active."""
    return "active" if doc.get("status") in (None, "active") else "trashed"


def as_datetime(value: Any) -> datetime | None:
    """A stored time as an aware UTC datetime: a BSON date, an ISO 8601 string or epoch
    milliseconds in a 64-bit integer or a double; None for anything else. Numbers are read
    as MongoDB's `$convert` reads them (the migration stores its result), which refuses a
    32-bit integer: a note shows the same date before the migration and after."""
    try:
        if isinstance(value, datetime):
            return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        if isinstance(value, str):
            if not STRING_YEAR.match(value):
                return None
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            parsed = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed
            # Whole milliseconds, as a BSON date (and the migration's $convert) holds it.
            return parsed.astimezone(UTC).replace(microsecond=parsed.microsecond // 1000 * 1000)
        if isinstance(value, Int64 | float | Decimal128):
            number = value.to_decimal() if isinstance(value, Decimal128) else value
            millis = int(number)  # toward zero, as $convert; BSON dates hold milliseconds
            # (the range is checked on the whole milliseconds, as the migration does)
            if not FIRST_MS <= millis <= LAST_MS:
                return None
            return EPOCH + timedelta(milliseconds=millis)
    except (ValueError, OverflowError, OSError):
        return None
    return None


def note_created_at(doc: dict[str, Any]) -> datetime:
    """When the note was created: its `created_at`, else its ObjectId's second, else 1970."""
    created = as_datetime(doc.get("created_at"))
    if created is not None:
        return created
    oid = doc.get("_id")
    return oid.generation_time if isinstance(oid, ObjectId) else EPOCH


def note_updated_at(doc: dict[str, Any]) -> datetime:
    """When the note last changed: its `updated_at`, else when it was created."""
    return as_datetime(doc.get("updated_at")) or note_created_at(doc)


def _kind(value: Any) -> str:
    name = type(value).__name__
    return {"list": "a list", "dict": "an object", "bool": "a boolean"}.get(name, f"a {name}")


def note_index_status(doc: dict[str, Any]) -> str:
    """The note's index status; a note trashed before indexing existed (no status) is
    as up to date as one trashed through the API, with no chunks, not "pending" forever."""
    status = doc.get("index_status")
    if status in ("pending", "indexing", "indexed", "failed", "disabled"):
        return status
    return "indexed" if note_status(doc) == "trashed" else "pending"


def unindexable_reason(doc: dict[str, Any]) -> str | None:
    """Why the note can never be indexed as stored (retrying will not help), or None."""
    for field in ("content_md", "title"):
        value = doc.get(field)
        if as_text(value) is None:
            return f"{field} is {_kind(value)}, not text: fix the document, then re-index it"
    author = doc.get("author_id")
    if author is None:
        return "the note has no author_id: no user owns it"
    if not isinstance(author, ObjectId):
        # Every read scopes by the owner's ObjectId: indexed, such a note would read as
        # "indexed" yet its owner could never list, read or find it.
        return (
            f"author_id is {_kind(author)} ({str(author)[:40]!r}), not an ObjectId: no user "
            "can reach the note; store the owner's ObjectId, then re-index it"
        )
    return None


class UnindexableNote(ValueError):
    """The note cannot be indexed as stored (`unindexable_reason`); retrying cannot help."""

    retryable = False


def check_indexable(doc: dict[str, Any]) -> None:
    """Raise `UnindexableNote` when the note cannot be indexed as stored."""
    problem = unindexable_reason(doc)
    if problem is not None:
        raise UnindexableNote(problem)
