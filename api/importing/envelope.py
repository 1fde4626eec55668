"""The front matter `autonote export` puts on top of each note, and its reading on import.

An exported file is this block followed by the note's `content_md` exactly as stored (its
own front matter included). Importing the file recognises the block only when it is exactly
what the export would write for the fields it holds, takes title, tags and times from it and
stores the rest as the content, so a restore gives the same notes back. A block a person
edited (a property added in Obsidian) is not recognised: the file is then imported like any
other, front matter kept as content, its `title`, `tags`, `created` and `updated` applied by
the usual rules. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml

from api.importing.metadata import front_matter_time

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_ID = re.compile(r"[0-9a-f]{24}")
_KEYS = {"id", "title", "tags", "created", "updated", "external_id"}
_REQUIRED = {"id", "tags", "created", "updated"}
# Characters YAML does not take as they are in a double-quoted scalar: outside its printable
# set, or line breaks it would fold (NEL, LS, PS).
_NOT_YAML_PRINTABLE = re.compile("[\x7f-\x9f\u2028\u2029\ufffe\uffff]")
_OPEN, _CLOSE = "---\n", "\n---\n"


@dataclass(frozen=True, slots=True)
class Envelope:
    """What the export writes about a note besides its content. `title` is None when the
    file name (without extension) is the title."""

    note_id: str
    title: str | None
    tags: list[str]
    created: datetime
    updated: datetime
    external_id: str | None = None


def _quoted(text: str) -> str:
    """`text` as a YAML double-quoted scalar (JSON's escapes are YAML's)."""
    dumped = json.dumps(text, ensure_ascii=False)
    return _NOT_YAML_PRINTABLE.sub(lambda m: f"\\u{ord(m[0]):04x}", dumped)


def _iso(moment: datetime) -> str:
    """UTC, milliseconds, `Z`: a YAML timestamp (four-digit year even before 1000)."""
    t = moment.astimezone(UTC)
    return (
        f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
        f".{t.microsecond // 1000:03d}Z"
    )


def render_envelope(envelope: Envelope) -> str:
    """The front matter block (ending in a newline) the export writes for `envelope`."""
    lines = [_OPEN.rstrip("\n"), f"id: {_quoted(envelope.note_id)}"]
    if envelope.title is not None:
        lines.append(f"title: {_quoted(envelope.title)}")
    lines.append("tags: [" + ", ".join(_quoted(t) for t in envelope.tags) + "]")
    lines.append(f"created: {_iso(envelope.created)}")
    lines.append(f"updated: {_iso(envelope.updated)}")
    if envelope.external_id is not None:
        lines.append(f"external_id: {_quoted(envelope.external_id)}")
    return "\n".join(lines) + _CLOSE


def _envelope_of(fields: Any) -> Envelope | None:
    """The envelope a loaded block describes, or None when it is not one."""
    if not isinstance(fields, dict) or not _REQUIRED <= set(fields) <= _KEYS:
        return None
    note_id, title, tags = fields["id"], fields.get("title"), fields["tags"]
    key = fields.get("external_id")
    created = front_matter_time(fields["created"])
    updated = front_matter_time(fields["updated"])
    texts_ok = all(v is None or isinstance(v, str) for v in (title, key))
    tags_ok = isinstance(tags, list) and all(isinstance(t, str) for t in tags)
    if not (isinstance(note_id, str) and _ID.fullmatch(note_id) and texts_ok and tags_ok):
        return None
    if created is None or updated is None:
        return None
    return Envelope(note_id, title, tags, created, updated, key)


def read_envelope(text: str) -> tuple[Envelope, str] | None:
    """`(envelope, content)` when `text` opens with an export block exactly as
    `render_envelope` writes it; else None."""
    if not text.startswith(_OPEN):
        return None
    end = text.find(_CLOSE, len(_OPEN) - 1)
    if end < 0:
        return None
    block = text[: end + len(_CLOSE)]
    try:
        fields = yaml.load(text[len(_OPEN) : end + 1], _YAML_LOADER)
    except yaml.YAMLError:
        return None
    envelope = _envelope_of(fields)
    if envelope is None or render_envelope(envelope) != block:
        return None
    return envelope, text[len(block) :]
