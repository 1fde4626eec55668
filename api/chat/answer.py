"""Post-processing a model's answer, and the extractive answer (pure)."""

from __future__ import annotations

import re
import textwrap
from typing import Any

import pyromark

from api.chat.context import Citation
from api.services.chunking.front_matter import bare_cr_as_newline

# [1], [1, 2], [1][3], [1-2] are all ways models cite, after a space or not (`UTC[1]`,
# `実行されます[1]`); a link's text (`[1](url)`) is not a marker. `(?P<after>...)` peeks
# at what follows, to know whether a dropped marker's spaces go with it.
_REFS = r"\d{1,3}(?:\s*[,;–-]\s*\d{1,3})*"
_REF_GROUP = re.compile(
    rf"(?P<space>[ \t]*)\[(?P<refs>{_REFS})\](?!\()(?=(?P<after>.?))",
    re.S,
)
# What may follow a dropped marker without the space before it: punctuation (also CJK)
# and closing delimiters (a space before "**" would end no emphasis; found by review).
_CLOSERS = frozenset(".,;:!?)]}*_~'\"。、，．！？：；」』）】")
# A separator, or none ("[9][10]", "[9] [10]"), before another marker.
_SEPARATOR_TO_MARKER = re.compile(rf"(?:[ \t]*[,;、，；])?[ \t]*(?=\[{_REFS}\](?!\())")
_SEPARATOR_BEFORE = re.compile(r"[ \t]*[,;、，；][ \t]*\Z")
_TRAILING_SPACE = re.compile(r"[ \t]*\Z")
_BLANK_HEAD = re.compile(r"\A(?:[ \t]*\r?\n)+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_WORD = re.compile(r"\w+", re.UNICODE)
STOPWORDS = frozenset(
    "a an and are as at be by do does for from how i in is it my of on or the to was what "
    "when where which who why with you your me we our can should did".split()
)


def _group_refs(group: str) -> list[int]:
    refs: list[int] = []
    for part in re.split(r"\s*[,;]\s*", group):
        if re.fullmatch(r"\d+\s*[–-]\s*\d+", part):
            lo, hi = (int(x) for x in re.split(r"\s*[–-]\s*", part))
            refs.extend(range(lo, hi + 1) if 0 < hi - lo < 20 else [lo, hi])
        elif part.strip().isdigit():
            refs.append(int(part))
    return refs


def _prose(answer: str) -> list[tuple[int, int]]:
    """(start, end) of the answer's text outside code, where citation markers live. Code
    is quoted, never cited: blocks (fenced with their fences, indented, unclosed ones to
    the end of their container) and spans, as the markdown parser reads them (a regex
    also hid markers after an escaped backtick, an unclosed fence in a list item or
    backticks in indented code; found by review)."""
    code, _, autolinks, targets = _literal_spans(answer)
    code = sorted([*code, *autolinks, *targets])  # a marker in an address is no citation
    spans, pos = [], 0
    for start, end in code:
        if start > pos:
            spans.append((pos, start))
        pos = max(pos, end)
    spans.append((pos, len(answer)))
    return [(a, b) for a, b in spans if b > a]


def cited_refs(answer: str) -> list[int]:
    """Reference numbers in the order the answer first cites them (outside code)."""
    seen: dict[int, None] = {}
    for a, b in _prose(answer):
        for match in _REF_GROUP.finditer(answer, a, b):
            for ref in _group_refs(match["refs"]):
                seen.setdefault(ref, None)
    return list(seen)


def remove_invented_refs(answer: str, valid: set[int]) -> str:
    """Drop references the context did not contain ([9] when only [1]..[4] exist). Only
    citation markers change, with what belonged to a dropped one: the space before it when
    punctuation or a closing delimiter follows ("Never [9]." → "Never.", "UTC [9]**" →
    "UTC**"), its parentheses ("([9])"), and the separator joining it to another marker
    ("Sources: [9], [1]" → "Sources: [1]"; "[1], [9]." → "[1]."; "a [9][9]." → "a.").
    Code, brackets that are
    not citations and everything else stay exactly as the model wrote them."""
    prose = _prose(answer)
    out: list[str] = []
    pos = scan = 0
    owed = ""  # the space before a dropped marker whose separator led to another marker
    kept_end = -1  # just after a kept marker (and the dropped chain directly after it)
    # Searched from where the last replacement ended: it may have taken the space that
    # begins the next marker's match ("[9], [10]" kept "[10]"; found by review).
    while (match := _REF_GROUP.search(answer, scan)) is not None:
        start, end = match.start(), match.end()
        scan = end
        if not any(a <= start and end <= b for a, b in prose):
            continue
        kept = [r for r in _group_refs(match["refs"]) if r in valid]
        if kept:
            refs = ", ".join(str(r) for r in dict.fromkeys(kept))
            prefix = answer[pos:start]
            out.append(prefix + (match["space"] or ("" if prefix else owed)) + f"[{refs}]")
            pos, owed, kept_end = end, "", end
            continue
        space = match["space"]
        bracket = match.start("refs") - 1
        if answer[bracket - 1 : bracket] == "(" and answer[end : end + 1] == ")":
            start, end = bracket - 1, end + 1  # "([9])": the parentheses go too
            space = _TRAILING_SPACE.search(answer, 0, start)[0]
            start -= len(space)
        prefix = answer[pos:start]
        if pos == kept_end and _SEPARATOR_BEFORE.match(prefix):
            prefix, space = "", ""  # "[1], [9] and", "[1], [9][10].": the comma goes too
        separator = _SEPARATOR_TO_MARKER.match(answer, end)
        if separator:  # "[9], [1]": the next marker takes this one's place and space
            line_start = (prefix or "".join(out[-1:])).endswith(("\n", "\r")) or not (prefix or out)
            out.append(prefix)
            owed = space or ("" if prefix else owed)
            if not owed and not line_start and not separator[0].strip():
                owed = separator[0]  # "nightly[9] [1]": the kept marker's own space
            kept_end = separator.end() if pos == kept_end else -1
            pos = scan = separator.end()
            continue
        after = answer[end : end + 1]
        before = _SEPARATOR_BEFORE.search(answer, pos, start)
        if before and (not after or after in _CLOSERS):
            prefix, space = answer[pos : before.start()], ""  # "[1], [9].": the comma too
        space = space or ("" if prefix else owed)
        line_start = (prefix or "".join(out[-1:])).endswith(("\n", "\r")) or not (prefix or out)
        if after == " " and line_start:
            end += 1  # "[9] Backups run." at a line's start: no space is left behind
            after = answer[end : end + 1]
        keep_space = after and not after.isspace() and after not in _CLOSERS
        out.append(prefix + (space if keep_space else ""))
        pos, scan, owed = end, end, ""
    out.append(answer[pos:])
    # Blank edges only: a leading indented code block keeps its indentation (stripped,
    # it became a paragraph whose "[9]" read as a citation; found by review).
    cleaned = _BLANK_HEAD.sub("", "".join(out)).rstrip()
    # A space the dropped markers left at the very start (the answer did not begin so).
    return cleaned.lstrip(" \t") if answer[:1] not in (" ", "\t") else cleaned


def used_citations(answer: str, citations: list[Citation]) -> list[Citation]:
    """The citations the (cleaned) answer actually cites, in reference order."""
    refs = set(cited_refs(answer))
    return [c for c in citations if c.ref in refs]


def _terms(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if w.lower() not in STOPWORDS and len(w) > 1}


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
    the question are left out (they padded answers with unrelated quotes, and code and
    tables were flattened onto one line; found by review)."""
    if not citations:
        return "I found nothing in your notes about this.", []
    q_terms = _terms(question)
    picks: list[tuple[float, int, int, str]] = []
    for rank, citation in enumerate(citations[: max_passages * 2]):
        units = _passages(citation.text) or [" ".join(citation.text.split())]
        best = max(units, key=lambda s: (len(q_terms & _terms(s)), -abs(len(s) - 160)))
        overlap = len(q_terms & _terms(best))
        picks.append((overlap - 0.5 * rank, overlap, citation.ref, best))
    picks.sort(key=lambda p: -p[0])
    chosen = [p for i, p in enumerate(picks[:max_passages]) if i == 0 or p[1] > 0]
    chosen.sort(key=lambda p: p[2])
    lines = [_quote(passage, ref) for _, _, ref, passage in chosen]
    return "\n".join([prefix, *lines]), [ref for _, _, ref, _ in chosen]


_FENCE_OPEN = re.compile(r"^\s*(`{3,}|~{3,})")
_PARSER = pyromark.Markdown(options=pyromark.Options.ENABLE_TABLES)
MAX_QUOTE_CHARS = 600
MAX_QUOTE_LINES = 40
MAX_BLOCK_CHARS = 1500
MAX_LINE_CHARS = 300


_BLOCKS = ("CodeBlock", "Table", "HtmlBlock")


def _tag_name(tag: str | dict[str, Any]) -> str:
    """The element name of a pulldown-cmark Start tag ("Paragraph", {"Link": {...}})."""
    return tag if type(tag) is str else next(iter(tag))


def _events(text: str) -> Any:
    """pulldown-cmark's events of `text`, read with each bare "\\r" as a line end, as
    CommonMark has it (the parser misses fences a bare "\\r" ends: removing an invented
    marker then edited code; found by review). Same length, so offsets carry over."""
    return _PARSER.events_with_range(bare_cr_as_newline(text) if "\r" in text else text)


def _block_lines(text: str) -> list[tuple[int, int]]:
    """(first, last) line numbers of each code block, table and HTML block in `text`, as
    the markdown parser (pulldown-cmark, the chunker's) finds them (an HTML block's lines
    were flattened onto one, a `<pre>` losing its line breaks; found by review). Reading
    fences by hand missed fences in list items, pipe-less tables, closing fences with text
    after them and fences inside indented code (found by review)."""
    data = text.encode("utf-8")
    spans: list[tuple[int, int]] = []
    depth = 0  # inside a code block or table: nested starts are part of it
    for event, span in _events(text):
        if type(event) is not dict:
            continue
        tag = event.get("Start")
        name = None if tag is None else _tag_name(tag)
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
        if lines[i].strip():
            prose.append(lines[i])
        else:
            flush_prose()
        i += 1
    flush_prose()
    return [u for u in units if u.strip()]


def _escape_refs(item: str, own: tuple[int, int]) -> str:
    """The quoted `item` (markdown as it goes into the answer) with the note's own
    citation-like markers made inert, so every [n] the answer shows outside code is one of
    its citations (a quoted "see [2]" read as citation 2; found by review), while it
    renders as the note does. Decided on the item's own parse, after any cut:
    - plain text, link text, destinations and titles: `\\[2\\]` (a markdown escape);
    - raw HTML (blocks and tags): `&#91;2&#93;` (entities: backslashes are text there);
    - an autolink holding one: its brackets percent-encoded (the same address; no escape
      works inside an autolink, and rewriting it as an inline link let the URL's own
      markdown characters end the link or add emphasis; found by review);
    - code: left as is (code is quoted, never cited).
    `own` is the span of the answer's own marker, left alone."""
    code, html, autolinks, _ = _literal_spans(item)
    out, pos = [], 0
    for link_start, link_end in autolinks:
        url = item[link_start:link_end]
        if _REF_GROUP.search(url):
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
        if _overlaps([own], a, b) or _overlaps(code, a, b):
            return m[0]
        if _overlaps(html, a, b):
            return f"{m['space']}&#91;{m['refs']}&#93;"
        if m.start("refs") >= 2 and text[m.start("refs") - 2] == "\\":
            return f"{m['space']}[{m['refs']}\\]"  # the note escaped "[" itself
        return f"{m['space']}\\[{m['refs']}\\]"

    return _REF_GROUP.sub(fix, text)


def _overlaps(spans: list[tuple[int, int]], a: int, b: int) -> bool:
    return any(s < b and a < e for s, e in spans)


Spans = list[tuple[int, int]]


def _literal_spans(text: str) -> tuple[Spans, Spans, Spans, Spans]:
    """Character spans of `text`'s code (blocks and spans), raw HTML (blocks and tags),
    autolinks (and email links) and inline links' destinations with their titles, as the
    markdown parser reads it."""
    code: Spans = []
    html: Spans = []
    autolinks: Spans = []
    targets: Spans = []
    data = text.encode("utf-8")
    for event, span in _events(text):
        if type(event) is not dict:
            continue
        start, end = span["start"], span["end"]
        tag = event.get("Start")
        if tag is not None:
            name = _tag_name(tag)
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


def _first_block(text: str) -> str | None:
    """The kind of `text`'s first block: "Table", "IndentedCode", "Paragraph", ..."""
    for event, _ in _events(text):
        if type(event) is dict and "Start" in event:
            tag = event["Start"]
            if type(tag) is dict and tag.get("CodeBlock") == "Indented":
                return "IndentedCode"
            return _tag_name(tag)
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
    # keeps its four columns (dedented, it read as a paragraph; found by review).
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
