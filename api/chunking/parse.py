"""Markdown structure from pulldown-cmark (via `pyromark`), as a flat tree of blocks.

Block-level elements with their UTF-8 byte ranges; inline events are only counted for the
nesting depth. The text after any front matter is parsed, each bare "\\r" read as "\\n".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pyromark

from api.chunking.front_matter import bare_cr_as_newline, read_front_matter
from api.chunking.front_matter import front_matter_end as front_matter_end  # kept import path
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
    front_matter: dict[str, Any] = field(default_factory=dict)  # its fields ({} if none)


def parse(src: SourceText) -> Document:
    """Parse the note into blocks (see module docstring)."""
    front = read_front_matter(src.data)
    body_start = front.end
    text = src.text if body_start == 0 else src.data[body_start:].decode("utf-8")
    if src.has_cr:
        text = bare_cr_as_newline(text)
    tree = _Tree(body_start)
    # One entry per open Start event: the block index, or -1 for inline/ignored elements.
    stack, open_blocks = tree.stack, tree.open_blocks
    for event, span in _PARSER.events_with_range(text):
        if type(event) is not dict:
            if event == "Rule" or tree.heading is not None:
                tree.leaf(event, span)
        elif "Start" in event:
            tag = event["Start"]
            name = tag if type(tag) is str else next(iter(tag))
            if name in _BLOCK_KINDS and len(open_blocks) < MAX_BLOCK_DEPTH:
                tree.start(name, tag, span)
            else:
                stack.append(-1)
        elif "End" in event:
            if stack[-1] < 0:
                stack.pop()
            else:
                tree.end()
        elif tree.heading is not None:
            tree.inline(event)
    return Document(
        src=src,
        body_start=body_start,
        blocks=tree.blocks,
        top=tree.top,
        front_matter=front.fields,
    )


class _Tree:
    """The blocks of one note, built from pulldown-cmark's events in order."""

    __slots__ = ("base", "blocks", "heading", "heading_parts", "open_blocks", "stack", "top")

    def __init__(self, base: int) -> None:
        self.base = base  # byte offset of the parsed text in the note
        self.blocks: list[Block] = []
        self.top: list[int] = []
        self.stack: list[int] = []  # see `parse`
        self.open_blocks: list[int] = []
        self.heading: Block | None = None  # the open top-level heading
        self.heading_parts: list[str] = []

    def leaf(self, event: str, span: dict[str, int]) -> None:
        """An event without content: a thematic break, or a line break."""
        if event == "Rule" and len(self.open_blocks) < MAX_BLOCK_DEPTH:
            start, end = span["start"] + self.base, span["end"] + self.base
            self._add(Block("rule", start, end, len(self.open_blocks)))
        elif self.heading is not None:
            self.heading_parts.append(" ")  # soft/hard break inside a setext heading

    def start(self, name: str, tag: str | dict[str, Any], span: dict[str, int]) -> None:
        """A block opens: `name` is a key of _BLOCK_KINDS, `tag` its event's payload."""
        kind = _BLOCK_KINDS[name]
        payload = None if type(tag) is str else tag[name]
        depth = len(self.open_blocks)
        block = Block(kind, span["start"] + self.base, span["end"] + self.base, depth)
        if kind == "heading":
            block.level = int(payload["level"][1])
            if depth == 0:
                self.heading = block
                self.heading_parts = []
        elif kind == "code":
            block.info = payload["Fenced"] if type(payload) is dict else None
        index = self._add(block)
        self.stack.append(index)
        self.open_blocks.append(index)

    def end(self) -> None:
        """The innermost open block closes."""
        self.stack.pop()
        done = self.blocks[self.open_blocks.pop()]
        if done is self.heading:
            done.text = heading_text("".join(self.heading_parts))
            self.heading = None

    def inline(self, event: dict[str, str]) -> None:
        """Inline content inside the open top-level heading: its breadcrumb text."""
        for key in _HEADING_TEXT_EVENTS:
            if key in event:
                self.heading_parts.append(event[key])
                return

    def _add(self, block: Block) -> int:
        index = len(self.blocks)
        self.blocks.append(block)
        if self.open_blocks:
            self.blocks[self.open_blocks[-1]].children.append(index)
        else:
            self.top.append(index)
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
