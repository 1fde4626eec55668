"""Where a markdown text's literal parts are (code, raw HTML, autolinks, link
destinations), as pulldown-cmark (via pyromark, as the chunker) reads it: the places where
a citation marker is text, not a citation (pure)."""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate
from typing import Any

import pyromark

from api.chunking.front_matter import bare_cr_as_newline

_PARSER = pyromark.Markdown(options=pyromark.Options.ENABLE_TABLES)


def tag_name(tag: str | dict[str, Any]) -> str:
    """The element name of a pulldown-cmark Start tag ("Paragraph", {"Link": {...}})."""
    return tag if type(tag) is str else next(iter(tag))


def events(text: str) -> Any:
    """pulldown-cmark's events of `text`, read with each bare "\\r" as a line end, as
    CommonMark has it (the parser misses fences a bare "\\r" ends, so markers inside such
    code would look like prose). Same length, so offsets carry over."""
    return _PARSER.events_with_range(bare_cr_as_newline(text) if "\r" in text else text)


def overlaps(spans: list[tuple[int, int]], a: int, b: int) -> bool:
    """Whether [a, b) overlaps any of `spans`."""
    return any(s < b and a < e for s, e in spans)


Spans = list[tuple[int, int]]


def literal_spans(text: str) -> tuple[Spans, Spans, Spans, Spans]:
    """Character spans of `text`'s code (blocks and spans), raw HTML (blocks and tags),
    autolinks (and email links) and inline links' destinations with their titles, as the
    markdown parser reads it."""
    code: Spans = []
    html: Spans = []
    autolinks: Spans = []
    targets: Spans = []
    data = text.encode("utf-8")
    for event, span in events(text):
        if type(event) is not dict:
            continue
        start, end = span["start"], span["end"]
        tag = event.get("Start")
        if tag is not None:
            name = tag_name(tag)
            if name == "CodeBlock":
                code.append((start, end))
            elif name == "HtmlBlock":
                html.append((start, end))
            elif name == "Link" and tag["Link"].get("link_type") in ("Autolink", "Email"):
                autolinks.append((start, end))
            elif name == "Link" and tag["Link"].get("link_type") == "Inline":
                cut = data.rfind(b"](", start, end)
                if cut >= 0:
                    targets.append((cut + 1, end))
        elif "Code" in event:
            code.append((start, end))
        elif "InlineHtml" in event:
            html.append((start, end))
    if len(data) != len(text):

        def chars(spans: Spans) -> Spans:
            return [(len(data[:a].decode()), len(data[:b].decode())) for a, b in spans]

        code, html, autolinks, targets = chars(code), chars(html), chars(autolinks), chars(targets)
    return code, html, autolinks, targets


def inline_spans(text: str) -> tuple[Spans, Spans]:
    """Character spans of `text`'s code (blocks and spans) and of its inline constructs
    (code spans, raw HTML tags, links and images, autolinks included), as the markdown
    parser reads it."""
    code: Spans = []
    inline: Spans = []
    for event, span in events(text):
        if type(event) is not dict:
            continue
        tag = event.get("Start")
        if tag is not None:
            name = tag_name(tag)
            if name == "CodeBlock":
                code.append((span["start"], span["end"]))
            elif name in ("Link", "Image"):
                inline.append((span["start"], span["end"]))
        elif "Code" in event:
            code.append((span["start"], span["end"]))
            inline.append((span["start"], span["end"]))
        elif "InlineHtml" in event:
            inline.append((span["start"], span["end"]))
    if not text.isascii():
        code, inline = _chars(text, code), _chars(text, inline)
    return code, inline


def _chars(text: str, spans: Spans) -> Spans:
    """Byte spans of `text` as character spans."""
    starts = list(accumulate((len(ch.encode("utf-8")) for ch in text), initial=0))
    return [(bisect_right(starts, a) - 1, bisect_right(starts, b) - 1) for a, b in spans]
