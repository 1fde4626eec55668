"""Markdown structure from pulldown-cmark (via `pyromark`), as a flat tree of blocks.

Why pyromark: it is a binding of pulldown-cmark, a CommonMark + GFM-tables parser that
reports the UTF-8 byte range of every element, so chunk offsets come from the real parse and
not from regexes; it parses the 205 KB CommonMark spec several times faster than
markdown-it-py, the other parser with source positions. Only block-level elements are kept;
inline events are skipped (but still counted for nesting depth).

Front matter (`front_matter.read_front_matter`) is left out: the parser reads the text
after it, with each bare "\\r" read as "\\n" (`front_matter.bare_cr_as_newline`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pyromark

from api.chunking.front_matter import bare_cr_as_newline, front_matter_end
from api.chunking.text import SourceText

_OPTIONS = pyromark.Options.ENABLE_TABLES
_PARSER = pyromark.Markdown(options=_OPTIONS)

# pulldown-cmark tag name -> our block kind. Anything else (emphasis, links, table cells...)
# is inline or irrelevant for structure.
_BLOCK_KINDS = {
    "Paragraph": "paragraph",
    "Heading": "heading",
    "BlockQuote": "quote",
    "CodeBlock": "code",
    "HtmlBlock": "html",
    "List": "list",
    "Item": "item",
    "Table": "table",
    "TableHead": "thead",
    "TableRow": "row",
    "FootnoteDefinition": "other",
    "DefinitionList": "other",
    "MetadataBlock": "other",
}
_HEADING_TEXT_EVENTS = ("Text", "Code", "InlineMath", "DisplayMath")
MAX_HEADING_CHARS = 256
# Deeper nesting (a 1 000-deep list is one giant item) is cut as text, by lines: recursing
# through every level would cost depth × size and Python's stack. The splitter expands a
# container only down to this depth.
MAX_STRUCTURE_DEPTH = 24
# Blocks nested deeper than this are not kept (they read as their ancestor's text): the
# splitter never looks below MAX_STRUCTURE_DEPTH + 1 (a table's rows), and one Block per
# level made `">" * 2_000_000` (a 2 MB note) take 855 MB.
MAX_BLOCK_DEPTH = MAX_STRUCTURE_DEPTH + 8
_ATTR_SEP = re.compile(r"[\s,]+")
_LANGUAGE = re.compile(r"([^\s{},:`]+)")


@dataclass(slots=True)
class Block:
    """One block element: its kind, byte range, nesting depth and child blocks."""

    kind: str
    start: int
    end: int
    depth: int
    children: list[int] = field(default_factory=list)
    level: int = 0  # heading level 1..6
    info: str | None = None  # code: fence info string ("" for a bare fence), None if indented
    text: str = ""  # heading: plain text for the breadcrumb


@dataclass(slots=True)
class Document:
    """A parsed note: every block in document order, and the top-level ones."""

    src: SourceText
    body_start: int  # first byte after BOM and front matter
    blocks: list[Block]
    top: list[int]  # indices of depth-0 blocks


def parse(src: SourceText) -> Document:
    """Parse the note into blocks (see module docstring)."""
    body_start = front_matter_end(src.data)
    base = body_start
    text = src.text if body_start == 0 else src.data[body_start:].decode("utf-8")
    if src.has_cr:
        text = bare_cr_as_newline(text)
    blocks: list[Block] = []
    top: list[int] = []
    # One entry per open Start event: the block index, or -1 for inline/ignored elements.
    stack: list[int] = []
    open_blocks: list[int] = []
    heading: Block | None = None
    heading_parts: list[str] = []
    for event, span in _PARSER.events_with_range(text):
        if type(event) is not dict:
            if event == "Rule" and len(open_blocks) < MAX_BLOCK_DEPTH:
                _add(
                    blocks,
                    top,
                    open_blocks,
                    Block("rule", span["start"] + base, span["end"] + base, len(open_blocks)),
                )
            elif heading is not None:
                heading_parts.append(" ")  # soft/hard break inside a setext heading
            continue
        if "Start" in event:
            tag = event["Start"]
            if type(tag) is str:
                name, payload = tag, None
            else:
                name, payload = next(iter(tag.items()))
            kind = _BLOCK_KINDS.get(name)
            depth = len(open_blocks)
            if kind is None or depth >= MAX_BLOCK_DEPTH:
                stack.append(-1)
                continue
            block = Block(kind, span["start"] + base, span["end"] + base, depth)
            if kind == "heading":
                block.level = int(payload["level"][1])
                if depth == 0:
                    heading = block
                    heading_parts = []
            elif kind == "code":
                block.info = payload["Fenced"] if type(payload) is dict else None
            index = _add(blocks, top, open_blocks, block)
            stack.append(index)
            open_blocks.append(index)
        elif "End" in event:
            if stack.pop() >= 0:
                done = blocks[open_blocks.pop()]
                if done is heading:
                    done.text = heading_text("".join(heading_parts))
                    heading = None
        elif heading is not None:
            for key in _HEADING_TEXT_EVENTS:
                if key in event:
                    heading_parts.append(event[key])
                    break
    return Document(src=src, body_start=body_start, blocks=blocks, top=top)


def _add(blocks: list[Block], top: list[int], open_blocks: list[int], block: Block) -> int:
    index = len(blocks)
    blocks.append(block)
    if open_blocks:
        blocks[open_blocks[-1]].children.append(index)
    else:
        top.append(index)
    return index


def heading_text(raw: str) -> str:
    """A heading's breadcrumb text: whitespace collapsed, at most MAX_HEADING_CHARS."""
    if not raw:  # a bare `#`
        return ""
    text = " ".join(raw.split())
    if len(text) > MAX_HEADING_CHARS:
        text = text[: MAX_HEADING_CHARS - 1].rstrip() + "…"
    return text


def code_language(info: str | None) -> str | None:
    """The language of a fenced code block, from its info string as the common tools write
    it: the first word (```` ```python title="x" ````), cut before line-highlight braces or
    a `:` option (VitePress ```` ```python{1,3} ````, Gatsby ```` ```js:title=x ````); in an
    attribute block, the first class or raw format (pandoc ```` ```{#id .haskell} ````,
    ```` ```{=html} ````), or else the first bare word (R Markdown / Quarto
    ```` ```{r, echo=FALSE} ````)."""
    info = (info or "").strip()
    if info.startswith("{"):
        words = _ATTR_SEP.split(info[1:].split("}", 1)[0])
        # pandoc classes (`.haskell`) and raw formats (`=html`), else a bare word
        marked = [w[1:] for w in words if len(w) > 1 and w[0] in ".="]
        bare = [w for w in words if w and w[0] not in "#.=" and "=" not in w]
        return (marked or bare or [None])[0]
    match = _LANGUAGE.match(info)
    language = match.group(1).strip(".") if match else ""
    return language or None
