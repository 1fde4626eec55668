"""The extractive answer: the best passages of the cited sections, quoted so that each
renders as it did in its note and its own "[n]" is no citation (pure). Citation markers in
model answers are in `api.chat.references`."""

from __future__ import annotations

import re
import textwrap

from api.chat.markdown_spans import events, literal_spans, overlaps, tag_name
from api.chat.references import REF_GROUP
from api.chat.types import Citation

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_WORD = re.compile(r"\w+", re.UNICODE)
STOPWORDS = frozenset(
    "a an and are as at be by do does for from how i in is it my of on or the to was what "
    "when where which who why with you your me we our can should did".split()
)


def _terms(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if w.lower() not in STOPWORDS and len(w) > 1}


# The whole answer when no section of the notes is relevant enough to cite.
NOTHING_MATCHES = "Nothing in your notes matches this question."
EXTRACTIVE_PREFIX = (
    "No chat model is configured, so this answer quotes the most relevant passages of your notes:"
)
FALLBACK_PREFIX = (
    "The chat model could not answer, so this answer quotes the most relevant passages of "
    "your notes:"
)


def extractive_answer(
    question: str,
    citations: list[Citation],
    *,
    max_passages: int = 3,
    prefix: str = EXTRACTIVE_PREFIX,
) -> tuple[str, list[int]]:
    """An answer made only of sentences quoted from the top sections, each cited, and the
    references it cites.

    Passages — a sentence of prose, or a whole code block or table — are ranked by overlap
    with the question's terms, with the section's rank as a prior; the best passage of each
    of the top sections is quoted verbatim (never invented or edited text: a note's own "[7]"
    stays, escaped as `\\[7\\]` so that it shows as written but is no citation marker;
    code and tables keep their lines). Passages after the first that share no term with
    the question are left out, so the answer is not padded with unrelated quotes."""
    if not citations:
        return NOTHING_MATCHES, []
    q_terms = _terms(question)
    picks: list[tuple[float, int, int, str]] = []
    for rank, citation in enumerate(citations[: max_passages * 2]):
        # A note with no body text is cited by its outline (its headings) or, with none,
        # by its title: the text it is found by.
        units = _passages(citation.text) or [
            " ".join(citation.text.split()) or " › ".join(citation.heading_path)
        ]
        best = max(units, key=lambda s: (len(q_terms & _terms(s)), -abs(len(s) - 160)))
        overlap = len(q_terms & _terms(best))
        picks.append((overlap - 0.5 * rank, overlap, citation.ref, best))
    picks.sort(key=lambda p: -p[0])
    chosen = [p for i, p in enumerate(picks[:max_passages]) if i == 0 or p[1] > 0]
    chosen.sort(key=lambda p: p[2])
    lines = [_quote(passage, ref) for _, _, ref, passage in chosen]
    return "\n".join([prefix, *lines]), [ref for _, _, ref, _ in chosen]


_FENCE_OPEN = re.compile(r"^\s*(`{3,}|~{3,})")
# An ATX heading line: its text, without the opening and closing "#"s.
_ATX_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+(.*?))??(?:[ \t]+#+)?[ \t]*$")
MAX_QUOTE_CHARS = 600
MAX_QUOTE_LINES = 40
MAX_BLOCK_CHARS = 1500
MAX_LINE_CHARS = 300


_BLOCKS = ("CodeBlock", "Table", "HtmlBlock")


def _block_lines(text: str) -> list[tuple[int, int]]:
    """(first, last) line numbers of each code block, table and HTML block in `text`, as
    the markdown parser (pulldown-cmark, the chunker's) finds them: fences in list items,
    pipe-less tables, closing fences with text after them and fences inside indented code
    included. Each is quoted with its own lines (a `<pre>` keeps its line breaks)."""
    data = text.encode("utf-8")
    spans: list[tuple[int, int]] = []
    depth = 0  # inside a code block or table: nested starts are part of it
    for event, span in events(text):
        if type(event) is not dict:
            continue
        tag = event.get("Start")
        name = None if tag is None else tag_name(tag)
        if name in _BLOCKS:
            if depth == 0:
                first = data.count(b"\n", 0, span["start"])
                last = data.count(b"\n", 0, max(span["start"], span["end"] - 1))
                spans.append((first, last))
            depth += 1
        elif "End" in event and event["End"] in _BLOCKS:
            depth -= 1
    return spans


def _passages(text: str) -> list[str]:
    """The quotable units of a section: each sentence of its prose (whitespace collapsed),
    each code block and each table whole, as written (whole lines). A fence the section
    cut before its content is no unit."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    units: list[str] = []
    prose: list[str] = []

    def flush_prose() -> None:
        flat = " ".join(" ".join(prose).split())
        units.extend(s.strip() for s in _SENTENCE.split(flat) if s.strip())
        prose.clear()

    blocks = dict(_block_lines("\n".join(lines)))
    i = 0
    while i < len(lines):
        if i in blocks:
            flush_prose()
            block = lines[i : blocks[i] + 1]
            while block and not block[-1].strip():
                block.pop()
            if len(block) > 1:
                units.append("\n".join(block))
            elif block and not _FENCE_OPEN.match(block[0]):
                prose.append(block[0])  # one line of code: quoted like a sentence
            i = blocks[i] + 1
            continue
        heading = _ATX_HEADING.match(lines[i])
        if heading:  # only an outline section holds heading lines: each is a unit
            flush_prose()
            units.append(heading[1] or "")
        elif lines[i].strip():
            prose.append(lines[i])
        else:
            flush_prose()
        i += 1
    flush_prose()
    return [u for u in units if u.strip()]


def _escape_refs(item: str, own: tuple[int, int]) -> str:
    """The quoted `item` (markdown as it goes into the answer) with the note's own
    citation-like markers made inert, so every [n] the answer shows outside code is one of
    its citations (a quoted "see [2]" is no citation 2), while it renders as the note
    does. Decided on the item's own parse, after any cut:
    - plain text, link text, destinations and titles: `\\[2\\]` (a markdown escape);
    - raw HTML (blocks and tags): `&#91;2&#93;` (entities: backslashes are text there);
    - an autolink holding one: its brackets percent-encoded (the same address; no escape
      works inside an autolink, and as an inline link the URL's own markdown characters
      could end the link or add emphasis);
    - code: left as is (code is quoted, never cited).
    `own` is the span of the answer's own marker, left alone."""
    code, html, autolinks, _ = literal_spans(item)
    out, pos = [], 0
    for link_start, link_end in autolinks:
        url = item[link_start:link_end]
        if REF_GROUP.search(url):
            out.append(_escape_plain(item[pos:link_start], pos, own, code, html))
            out.append(url.replace("[", "%5B").replace("]", "%5D"))
            pos = link_end
    out.append(_escape_plain(item[pos:], pos, own, code, html))
    return "".join(out)


def _escape_plain(
    text: str,
    base: int,
    own: tuple[int, int],
    code: list[tuple[int, int]],
    html: list[tuple[int, int]],
) -> str:
    """`_escape_refs` of `text`, which starts at `base` in the item."""

    def fix(m: re.Match[str]) -> str:
        a, b = base + m.start("refs") - 1, base + m.end()
        if overlaps([own], a, b) or overlaps(code, a, b):
            return m[0]
        if overlaps(html, a, b):
            return f"{m['space']}&#91;{m['refs']}&#93;"
        if m.start("refs") >= 2 and text[m.start("refs") - 2] == "\\":
            return f"{m['space']}[{m['refs']}\\]"  # the note escaped "[" itself
        return f"{m['space']}\\[{m['refs']}\\]"

    return REF_GROUP.sub(fix, text)


def _first_block(text: str) -> str | None:
    """The kind of `text`'s first block: "Table", "IndentedCode", "Paragraph", ..."""
    for event, _ in events(text):
        if type(event) is dict and "Start" in event:
            tag = event["Start"]
            if type(tag) is dict and tag.get("CodeBlock") == "Indented":
                return "IndentedCode"
            return tag_name(tag)
    return None


def _closes(line: str, opener: str) -> bool:
    """Whether `line` closes a fence opened with `opener` (CommonMark: the same character,
    at least as many, nothing else on the line)."""
    match = re.fullmatch(r"\s*(`+|~+)\s*", line)
    return bool(match) and match.group(1)[0] == opener[0] and len(match.group(1)) >= len(opener)


def _quote(passage: str, ref: int) -> str:
    """One list item quoting `passage`: prose on the item's line, code and tables below
    it, indented into the item so they keep their lines. A long block is cut at whole
    lines (a cut line ends in "…"), with its closing fence kept and "(…)" after it; a code
    block the section cut off is shown without its opening fence (an unclosed fence would
    swallow the rest of the answer)."""
    marker = f"[{ref}]"
    if "\n" not in passage:
        if _FENCE_OPEN.match(passage):  # a lone fence line: text, or it takes our marker
            passage = "\\" + passage.lstrip()
        cut = passage if len(passage) <= MAX_QUOTE_CHARS else passage[:MAX_QUOTE_CHARS] + "…"
        item = f"- {cut} {marker}"
        return _escape_refs(item, (len(item) - len(marker), len(item)))
    # The block's own indentation (a fence in a list item) would make it indented code
    # inside the answer's list item, showing its fences as text; an indented code block
    # keeps its four columns (dedented, it would read as a paragraph).
    lines = textwrap.dedent(passage).splitlines()
    fence = _FENCE_OPEN.match(lines[0])
    closing: list[str] = []
    if fence and len(lines) > 1 and _closes(lines[-1], fence.group(1)):
        closing = [lines.pop()]
    elif fence:  # cut by the section: an indented code block instead
        lines = ["    " + line for line in lines[1:]]
    elif _first_block(passage) == "IndentedCode" and _first_block("\n".join(lines)) != "Table":
        lines = ["    " + line for line in lines]  # (a table in a list item reads as one)
    kept: list[str] = []
    size = 0
    for line in lines:
        cut = line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…"
        if kept and (len(kept) >= MAX_QUOTE_LINES - 1 or size + len(cut) > MAX_BLOCK_CHARS):
            break
        kept.append(cut)
        size += len(cut)
    body = "\n".join(f"  {line}" for line in [*kept, *closing])
    more = "\n\n  (…)" if len(kept) < len(lines) else ""
    return _escape_refs(f"- {marker}\n\n{body}{more}", (2, 2 + len(marker)))
