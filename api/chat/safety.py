"""Answers safe to render (pure): images become links, links with a dangerous scheme and raw
HTML become text, as the markdown parser reads the answer (never inside code), so a client
rendering it fetches and runs nothing a note may have injected. Docs: docs/chat.md.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

from api.chat.markdown_spans import events, literal_spans, overlaps, tag_name

DANGEROUS_SCHEMES = ("javascript:", "vbscript:", "data:")
# Browsers drop ASCII whitespace and control characters inside a scheme ("java\tscript:").
_IGNORED_IN_SCHEME = re.compile(r"[\x00-\x20\x7f]+")
_REFERENCE_TYPES = ("Reference", "Collapsed", "Shortcut")
# A link reference definition's first line: "[label]:" after at most three spaces (in a
# block quote or list item too).
_DEFINITION = re.compile(
    r"^(?:[ ]{0,3}(?:>[ ]?|[-*+][ ]+|\d{1,9}[.)][ ]+))*[ ]{0,3}(\[)((?:[^\[\]\\]|\\.){1,999})\]:",
    re.MULTILINE,
)
# Each pass neutralises every construct the parse shows; one can hide another (an image in a
# link's text), so a few passes may be needed. Past this many, everything is escaped.
MAX_PASSES = 8

Edit = tuple[int, int, str]  # (start, end, replacement), character offsets


def dangerous_url(url: str) -> bool:
    """Whether following `url` would run code or open inline content."""
    return _IGNORED_IN_SCHEME.sub("", url).lower().startswith(DANGEROUS_SCHEMES)


def neutralise(text: str) -> str:
    """`text` (markdown) with images as links, dangerous links as text and raw HTML escaped
    (see module docstring); text with none of them is returned unchanged."""
    if not _may_hold_any(text):
        return text
    for _ in range(MAX_PASSES):
        edits = _edits(text)
        if not edits:
            return text
        text = _apply(text, edits)
    return _escape_all(text)


def _may_hold_any(text: str) -> bool:
    # No "<", "!" or "]" (every link and image has one): nothing to parse.
    return "<" in text or "]" in text or "!" in text


def _apply(text: str, edits: dict[int, Edit]) -> str:
    out: list[str] = []
    pos = 0
    for start in sorted(edits):
        _, end, replacement = edits[start]
        if start < pos:
            continue
        out.append(text[pos:start])
        out.append(replacement)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _escape_all(text: str) -> str:
    """The last resort: no "<" and no "[" at all, so no HTML, link or image is left."""
    return text.replace("<", "&lt;").replace("[", "&#91;")


class _Offsets:
    """Character offsets of the parser's UTF-8 byte offsets."""

    def __init__(self, text: str) -> None:
        self.ascii = text.isascii()
        if not self.ascii:
            sizes = [len(ch.encode("utf-8")) for ch in text]
            self.starts = list(accumulate(sizes, initial=0))

    def char(self, byte: int) -> int:
        return byte if self.ascii else bisect_right(self.starts, byte) - 1


def _elements(text: str) -> Iterator[tuple[str, dict[str, Any], int, int]]:
    """(kind, payload, start, end) of every image, link, inline HTML and HTML block, in
    character offsets."""
    offsets = _Offsets(text)
    for event, span in events(text):
        if type(event) is not dict:
            continue
        tag = event.get("Start")
        if tag is not None:
            name = tag_name(tag)
            if name in ("Image", "Link", "HtmlBlock"):
                payload = tag[name] if type(tag) is dict else {}
                yield name, payload, offsets.char(span["start"]), offsets.char(span["end"])
        elif "InlineHtml" in event:
            yield "InlineHtml", {}, offsets.char(span["start"]), offsets.char(span["end"])


def _edits(text: str) -> dict[int, Edit]:
    """One pass: the edits that neutralise what the parse of `text` shows."""
    edits: dict[int, Edit] = {}
    definitions: dict[str, list[int]] | None = None
    for kind, payload, start, end in _elements(text):
        if kind in ("InlineHtml", "HtmlBlock"):
            for i in _all(text, "<", start, end):
                edits[i] = (i, i + 1, "&lt;")
            continue
        image = kind == "Image"
        if not image and not dangerous_url(payload.get("dest_url", "")):
            continue
        if payload.get("link_type") in _REFERENCE_TYPES:
            if definitions is None:
                definitions = _definitions(text)
            found = definitions.get(_label(payload.get("id", "")), [])
            for i in found:
                edits[i] = (i, i + 1, "&#91;")
            if found:
                continue
        if image:
            edits.update(_image_as_link(text, start))
        elif payload.get("link_type") in ("Autolink", "Email"):
            edits[start] = (start, start + 1, "&lt;")
        else:
            edits[start] = (start, start + 1, "&#91;")
    return edits


def _image_as_link(text: str, start: int) -> dict[int, Edit]:
    """The image at `start` as a link: its "!" goes ("[image]" for an empty alt text), and
    a "!" right before it is shown as an entity, or it would open a new image."""
    edits: dict[int, Edit] = {}
    if text.startswith("![]", start):
        edits[start] = (start, start + 3, "[image]")
    else:
        edits[start] = (start, start + 1, "")
    before = start - 1
    if before >= 0 and text[before] == "!" and not _escaped(text, before):
        edits[before] = (before, start, "&#33;")
    return edits


def _escaped(text: str, i: int) -> bool:
    """Whether the character at `i` is backslash-escaped."""
    n = 0
    while i - n - 1 >= 0 and text[i - n - 1] == "\\":
        n += 1
    return n % 2 == 1


def _all(text: str, char: str, start: int, end: int) -> Iterator[int]:
    i = text.find(char, start, end)
    while i >= 0:
        yield i
        i = text.find(char, i + 1, end)


def _label(raw: str) -> str:
    """A reference label as CommonMark matches them: case-folded, whitespace collapsed."""
    return " ".join(raw.split()).casefold()


def _definitions(text: str) -> dict[str, list[int]]:
    """Where each label's definition lines open their "[" (all of them: the parser takes the
    first, a line a container hides may be another)."""
    found: dict[str, list[int]] = {}
    code = literal_spans(text)[0]
    for match in _DEFINITION.finditer(text):
        if not overlaps(code, match.start(1), match.end()):
            found.setdefault(_label(match[2]), []).append(match.start(1))
    return found
