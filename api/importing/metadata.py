"""Title, tags and times of a markdown note: front matter, first H1, Obsidian-style `#tags`.

Read with pyromark, the chunker's parser (a `# comment` in a code block is no heading,
`#include` in code no tag), and front matter by the chunker's rule
(`api.chunking.front_matter`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

import pyromark

from api.chunking.front_matter import bare_cr_as_newline, read_front_matter

_OPTIONS = (
    pyromark.Options.ENABLE_TABLES
    | pyromark.Options.ENABLE_STRIKETHROUGH
    | pyromark.Options.ENABLE_TASKLISTS
)
_INLINE_TAG = re.compile(r"(?:^|(?<=\s))#([\w/-]+)")
_TAG_SPLIT = re.compile(r"[,\s]+")
_WORD_BOUNDARY_BYTES = frozenset(b" \t\r\n")


@dataclass
class MarkdownMetadata:
    """What the importer reads from a markdown note's source."""

    front_matter: dict[str, Any] = field(default_factory=dict)
    first_h1: str | None = None
    inline_tags: list[str] = field(default_factory=list)


def _kind(event: Any) -> tuple[str, str]:
    """(`Start`/`End`/`Text`/..., container name) of a pyromark event."""
    if isinstance(event, str):
        return event, ""
    ((key, value),) = event.items()
    if isinstance(value, dict):
        return key, next(iter(value))
    if isinstance(value, str) and key in ("Start", "End"):
        return key, value
    return key, ""


def read_markdown_metadata(markdown: str, *, inline_tags: bool = True) -> MarkdownMetadata:
    """Parse `markdown` once and return its front matter, first H1 text and inline tags."""
    # The chunker's reading of front matter and line endings: both see the same blocks.
    data = markdown.encode("utf-8", "surrogatepass")
    front = read_front_matter(data)
    meta = MarkdownMetadata(front_matter=front.fields)
    body = data[front.end :].decode("utf-8", "replace")
    source = body.encode("utf-8")
    skip_depth = 0  # inside code or HTML blocks
    h1_parts: list[str] | None = None
    for event, span in pyromark.events_with_range(bare_cr_as_newline(body), options=_OPTIONS):
        kind, name = _kind(event)
        if name in ("CodeBlock", "HtmlBlock"):
            skip_depth += 1 if kind == "Start" else -1
        elif kind == "Start" and name == "Heading" and meta.first_h1 is None:
            if event["Start"]["Heading"]["level"] == "H1":
                h1_parts = []
        elif kind == "End" and name == "Heading" and h1_parts is not None:
            meta.first_h1 = " ".join("".join(h1_parts).split()) or None
            h1_parts = None
        elif kind in ("Text", "Code") and not skip_depth:
            if h1_parts is not None:
                h1_parts.append(event[kind])
            if kind == "Text" and inline_tags:
                meta.inline_tags.extend(_tags_in(event["Text"], source, span["start"]))
        elif kind in ("SoftBreak", "HardBreak") and h1_parts is not None:
            h1_parts.append(" ")
    meta.inline_tags = normalize_tags(meta.inline_tags)
    return meta


def _tags_in(text: str, source: bytes, start: int) -> Iterable[str]:
    for match in _INLINE_TAG.finditer(text):
        # A match at the start of a text event may follow something the parser consumed
        # (an escaping backslash, `[` of a link): only a real word boundary counts.
        if match.start() == 0 and start > 0 and source[start - 1] not in _WORD_BOUNDARY_BYTES:
            continue
        tag = match.group(1).rstrip("/-")
        if any(ch.isalpha() for ch in tag):
            yield tag


def normalize_tags(raw: Iterable[Any]) -> list[str]:
    """Lowercase, strip `#` and whitespace, drop empties, dedupe keeping first order."""
    seen: dict[str, None] = {}
    for item in raw:
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            continue
        tag = " ".join(str(item).strip().lstrip("#").split()).lower()
        if tag:
            seen.setdefault(tag, None)
    return list(seen)


def front_matter_tags(front_matter: dict[str, Any]) -> list[str]:
    """`tags` from front matter: a YAML list, or one comma/space separated string."""
    value = front_matter.get("tags")
    if isinstance(value, str):
        return normalize_tags(_TAG_SPLIT.split(value))
    if isinstance(value, list):
        return normalize_tags(value)
    return []


def front_matter_title(front_matter: dict[str, Any]) -> str | None:
    """A non-empty scalar `title` from front matter, whitespace-normalised."""
    value = front_matter.get("title")
    if value is None or isinstance(value, dict | list | bool):
        return None
    title = " ".join(str(value).split())
    return title or None


def front_matter_time(value: Any) -> datetime | None:
    """A front matter time (`created`, `updated`) as an aware UTC datetime at BSON's
    millisecond precision: a YAML timestamp or date, or an ISO 8601 string; a time without
    an offset is read as UTC. None for anything else."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if not isinstance(value, datetime):
        return None
    aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value
    try:
        utc = aware.astimezone(UTC)
    except OverflowError:  # an offset that moves it past year 1 or 9999
        return None
    return utc.replace(microsecond=utc.microsecond // 1000 * 1000)


def front_matter_times(front_matter: dict[str, Any]) -> tuple[datetime | None, datetime | None]:
    """(`created`, `updated`) from front matter, each None when absent or not a time."""
    return front_matter_time(front_matter.get("created")), front_matter_time(
        front_matter.get("updated")
    )
