"""Leaf sections of a markdown note, as a labelled retrieval dataset defines them.

A section is a heading's OWN body, trimmed (before the first heading: path `()`), found by a
small line-based scan that does not depend on the system under test and that a dataset
author can reproduce (its tests cross-check it against a CommonMark parser).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ATX = re.compile(r"^ {0,3}(#{1,6})(?=[ \t]|$)(.*)$")
_ATX_CLOSING = re.compile(r"(?:^|[ \t])#+[ \t]*$")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
# Lines that open another kind of block: a setext underline after them is not a heading
# (`- item` + `---` is a list then a thematic break, `| a |` + `---` a table row...).
_OTHER_BLOCK = re.compile(r"^ {0,3}(?:[-*+](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$)|>|\||<)")
# Indented code cannot interrupt a paragraph, but it cannot start one either.
_INDENTED = re.compile(r"^(?: {4,}|\t)")
_THEMATIC_BREAK = re.compile(r"^ {0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$")
_FRONT_MATTER_OPEN = "---"
_FRONT_MATTER_CLOSE = ("---", "...")


@dataclass(frozen=True, slots=True)
class Heading:
    """A top-level heading found by the scan."""

    level: int
    text: str
    line: int  # 1-based line number of the heading's first line
    start: int  # offset of the heading's first character (line start)
    end: int  # offset just after the heading line(s), newline included


@dataclass(frozen=True, slots=True)
class Section:
    """A leaf section: one heading's own body (or the text before the first heading)."""

    headings: tuple[str, ...]  # breadcrumb below the note title; () = before first heading
    level: int  # heading level 1-6; 0 for the text before the first heading
    line: int  # 1-based line of its heading (first body line for the preamble)
    span: tuple[int, int]  # [start, end) of the trimmed own body; start == end when empty

    @property
    def is_empty(self) -> bool:
        """True when the heading has no body of its own (only sub-sections)."""
        return self.span[0] == self.span[1]


def normalize_heading(text: str) -> str:
    """Collapse whitespace so `headings` written by hand match the scanned text."""
    return " ".join(text.split())


def _lines(text: str) -> list[tuple[int, str]]:
    """(offset, line without its line ending) for every line; only \\n and \\r\\n end lines,
    unlike str.splitlines, so offsets agree with what a markdown parser sees."""
    out: list[tuple[int, str]] = []
    pos = 0
    for raw in text.split("\n"):
        out.append((pos, raw.removesuffix("\r")))
        pos += len(raw) + 1
    return out


def front_matter_end(text: str) -> int:
    """Offset just after a YAML front matter block at the very top of the note, else 0."""
    lines = _lines(text)
    if lines[0][1].removeprefix("\ufeff").rstrip() != _FRONT_MATTER_OPEN:
        return 0
    for offset, line in lines[1:]:
        if line.rstrip() in _FRONT_MATTER_CLOSE:
            return _line_end(text, offset)
    return 0


def _atx_text(rest: str) -> str:
    rest = rest.strip()
    closing = _ATX_CLOSING.search(rest)
    if closing:
        rest = rest[: closing.start()]
    return normalize_heading(rest)


def scan_headings(text: str) -> list[Heading]:
    """Top-level ATX and setext headings of `text`, in order.

    Headings inside fenced code blocks (``` or ~~~, unclosed fences run to the end), inside
    front matter, in list items or block quotes, or indented as code are not headings.
    """
    skip_to = front_matter_end(text)
    lines = _lines(text)
    headings: list[Heading] = []
    fence: tuple[str, int] | None = None  # (fence char, opening length)
    paragraph: list[int] = []  # indices of the lines of the open paragraph
    for index, (offset, line) in enumerate(lines):
        if offset < skip_to:
            continue
        if fence is not None:
            if _closes(line, fence):
                fence = None
            continue
        fence = _opened_fence(line)
        if fence is not None:
            paragraph = []
            continue
        heading = _heading_at(text, lines, index, paragraph)
        if heading is not None:
            headings.append(heading)
            paragraph = []
        elif not line.strip() or _THEMATIC_BREAK.match(line) or _OTHER_BLOCK.match(line):
            paragraph = []
        elif paragraph or not _INDENTED.match(line):
            paragraph.append(index)
    return headings


def _opened_fence(line: str) -> tuple[str, int] | None:
    """(fence char, length) when `line` opens a fenced code block (a backtick fence's info
    string holds no backtick)."""
    opening = _FENCE_OPEN.match(line)
    if opening is None or (opening.group(1)[0] == "`" and "`" in opening.group(2)):
        return None
    return opening.group(1)[0], len(opening.group(1))


def _closes(line: str, fence: tuple[str, int]) -> bool:
    """Whether `line` closes the code block opened by `fence`."""
    close = _FENCE_OPEN.match(line)
    return bool(
        close
        and close.group(1)[0] == fence[0]
        and len(close.group(1)) >= fence[1]
        and not close.group(2).strip()
    )


def _heading_at(
    text: str, lines: list[tuple[int, str]], index: int, paragraph: list[int]
) -> Heading | None:
    """The heading line `index` makes: an ATX heading, or the setext underline of the open
    `paragraph`."""
    offset, line = lines[index]
    atx = _ATX.match(line)
    if atx:
        level = len(atx.group(1))
        return Heading(level, _atx_text(atx.group(2)), index + 1, offset, _line_end(text, offset))
    underline = _SETEXT_UNDERLINE.match(line)
    if not (underline and paragraph):
        return None
    first = paragraph[0]
    words = " ".join(lines[i][1].strip() for i in paragraph)
    level = 1 if underline.group(1)[0] == "=" else 2
    end = _line_end(text, offset)
    return Heading(level, normalize_heading(words), first + 1, lines[first][0], end)


def _line_end(text: str, offset: int) -> int:
    newline = text.find("\n", offset)
    return len(text) if newline < 0 else newline + 1


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end)


def all_sections(text: str, title: str = "") -> list[Section]:
    """Every section of the note in document order, empty ones included.

    A level-1 heading whose text equals the note title is the title written into the
    content (Obsidian style), so it is left out of the breadcrumbs: its own body is the
    note's intro, with heading path `()` like text before the first heading.
    """
    headings = scan_headings(text)
    title_key = normalize_heading(title)
    body_start = front_matter_end(text)
    first_heading = headings[0].start if headings else len(text)
    first_line = text.count("\n", 0, body_start) + 1
    sections = [Section((), 0, first_line, _trimmed(text, body_start, first_heading))]
    stack: list[Heading] = []
    for i, heading in enumerate(headings):
        while stack and stack[-1].level >= heading.level:
            stack.pop()
        stack.append(heading)
        path = tuple(
            h.text for h in stack if not (h.level == 1 and title_key and h.text == title_key)
        )
        body_end = headings[i + 1].start if i + 1 < len(headings) else len(text)
        span = _trimmed(text, heading.end, body_end)
        sections.append(Section(path, heading.level, heading.line, span))
    return sections


def leaf_sections(text: str, title: str = "") -> list[Section]:
    """The sections a citation can point at: those with a non-empty own body."""
    return [s for s in all_sections(text, title) if not s.is_empty]
