"""Post-processing a model's answer, and the extractive answer (pure)."""

from __future__ import annotations

import re
import textwrap

import pyromark

from api.chat.context import Citation

# [1], [1, 2], [1][3], [1-2] are all ways models cite, after a space or not (`UTC[1]`,
# `実行されます[1]`); a link's text (`[1](url)`) is not a marker. `(?P<after>...)` peeks
# at what follows, to know whether a dropped marker's spaces go with it.
_REF_GROUP = re.compile(
    r"(?P<space>[ \t]*)\[(?P<refs>\d{1,3}(?:\s*[,;–-]\s*\d{1,3})*)\](?!\()(?=(?P<after>.?))",
    re.S,
)
# Code is quoted, never cited: fenced blocks (any indentation, so also in list items; to a
# closing fence of the same character at least as long, or the end) and inline code spans
# (which, as in CommonMark, never cross a blank line) stay exactly as the model wrote them.
_CODE = re.compile(
    r"(?m:^[ \t]*(?P<fence>(?P<fc>[`~])(?P=fc){2,})[^\n]*\n"
    r"(?s:.*?)(?:^[ \t]*(?P=fence)(?P=fc)*[ \t]*\r?$|\Z))"
    r"|(?P<ticks>`+)(?!`)(?:(?!\r?\n[ \t]*\r?\n)(?s:.))+?(?<!`)(?P=ticks)(?!`)"
)
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
    """(start, end) of the answer's text outside code, where citation markers live."""
    spans, pos = [], 0
    for code in _CODE.finditer(answer):
        spans.append((pos, code.start()))
        pos = code.end()
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
    citation markers change: code, brackets that are not citations, whitespace and
    everything else stay exactly as the model wrote them."""

    def fix(match: re.Match[str]) -> str:
        kept = [r for r in _group_refs(match["refs"]) if r in valid]
        if kept:
            return match["space"] + "[" + ", ".join(str(r) for r in dict.fromkeys(kept)) + "]"
        # "Never [9]." → "Never.", "see [9] and" → "see and"; but "nightly [9][1]" keeps
        # its space for the marker that follows ("nightly [1]").
        after = match["after"]
        return "" if not after or after.isspace() or after in ".,;:!?)" else match["space"]

    out, pos = [], 0
    for a, b in _prose(answer):
        out.append(answer[pos:a])
        out.append(_REF_GROUP.sub(fix, answer[a:b]))
        pos = b
    out.append(answer[pos:])
    return "".join(out).strip()


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
    stays, and is not read as a citation; code and tables keep their lines). Passages after
    the first that share no term with the question are left out (they padded answers with
    unrelated quotes, and code and tables were flattened onto one line; found by review)."""
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


def _block_lines(text: str) -> list[tuple[int, int]]:
    """(first, last) line numbers of each code block and table in `text`, as the markdown
    parser (pulldown-cmark, the chunker's) finds them. Reading fences by hand missed
    fences in list items, pipe-less tables, closing fences with text after them and
    fences inside indented code (found by review)."""
    data = text.encode("utf-8")
    spans: list[tuple[int, int]] = []
    depth = 0  # inside a code block or table: nested starts are part of it
    for event, span in _PARSER.events_with_range(text):
        if type(event) is not dict:
            continue
        tag = event.get("Start")
        name = None if tag is None else (tag if type(tag) is str else next(iter(tag)))
        if name in ("CodeBlock", "Table"):
            if depth == 0:
                first = data.count(b"\n", 0, span["start"])
                last = data.count(b"\n", 0, max(span["start"], span["end"] - 1))
                spans.append((first, last))
            depth += 1
        elif "End" in event and event["End"] in ("CodeBlock", "Table"):
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
    if "\n" not in passage:
        cut = passage if len(passage) <= MAX_QUOTE_CHARS else passage[:MAX_QUOTE_CHARS] + "…"
        return f"- {cut} [{ref}]"
    # The block's own indentation (a fence in a list item) would make it indented code
    # inside the answer's list item, showing its fences as text.
    lines = textwrap.dedent(passage).splitlines()
    fence = _FENCE_OPEN.match(lines[0])
    closing: list[str] = []
    if fence and len(lines) > 1 and _closes(lines[-1], fence.group(1)):
        closing = [lines.pop()]
    elif fence:  # cut by the section: an indented code block instead
        lines = ["    " + line for line in lines[1:]]
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
    return f"- [{ref}]\n\n{body}{more}"
