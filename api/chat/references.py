"""Citation markers in a model's answer: which it cites, and dropping the ones the
context did not hold (pure)."""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections.abc import Iterator

from api.chat.markdown_spans import literal_spans
from api.chat.types import Citation

# [1], [1, 2], [1][3], [1-2] are all ways models cite, after a space or not (`UTC[1]`,
# `実行されます[1]`); a link's text (`[1](url)`) is not a marker, nor is `[0]` or `[07]`
# (references count from 1: `items[0]` is code the model left unquoted; see `_group_refs`).
# `(?P<after>...)` peeks at what follows, to know whether a dropped marker's spaces go with it.
_REFS = r"\d{1,3}(?:\s*[,;–-]\s*\d{1,3})*"
# Spaces on a line, no-break and ideographic ones too ("note\u00a0[9].").
_SPACES = " \t\u00a0\u3000"
_SPACE = f"[{_SPACES}]"
# The space group starts where its spaces start (or is empty): "[ \t]*" alone would be
# retried at every position of a long run of spaces, quadratic.
REF_GROUP = re.compile(
    rf"(?P<space>(?<!{_SPACE}){_SPACE}+|)\[(?P<refs>{_REFS})\](?!\()(?=(?P<after>.?))",
    re.S,
)
# What may follow a dropped marker without the space before it: punctuation (also CJK)
# and closing delimiters (a space before "**" would end no emphasis).
_CLOSERS = frozenset(".,;:!?)]}*_~'\"。、，．！？：；」』）】")
# Between two markers of one run ("[1], [9]", "[9][10]", "[9] [10]", "[1]–[3]"; CJK too).
_GAP = re.compile(rf"{_SPACE}*(?:[,;、，；–-]{_SPACE}*)?")
_SEPARATOR_BEFORE = re.compile(rf"{_SPACE}*[,;、，；]{_SPACE}*\Z")
_BLANK_HEAD = re.compile(r"\A(?:[ \t]*\r?\n)+")
# What wraps a marker and goes with it when it is dropped: "([9])", "**[9]**", "[[9]]".
_WRAPPERS = (("(", ")"), ("**", "**"), ("__", "__"), ("~~", "~~"), ("*", "*"), ("_", "_"))
_WRAPPERS += (("[", "]"),)
# A list item's marker ("- ", "1. "): a line holding nothing else but dropped markers goes.
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])?[ \t]*\Z")
# A line that only labels its references ("Sources:", "**References:**"): when every marker
# after it is dropped, the label goes with them (not "Sources: [9], [10]." → "Sources:.").
_SOURCES_LABEL = re.compile(
    r"[ \t]*(?:[*_]{1,2})?(?:sources?|references?|citations?)(?:[*_]{1,2})?[ \t]*:"
    r"(?:[*_]{1,2})?[ \t]*\Z",
    re.IGNORECASE,
)
_LABEL_TAIL = re.compile(r"[ \t]*[.;]?[ \t]*(?:\r?\n|\r|\Z)")


_PARTS = re.compile(r"\s*[,;]\s*")
_RANGE = re.compile(r"\d+\s*[–-]\s*\d+")
_RANGE_DASH = re.compile(r"\s*[–-]\s*")


# A streamed answer is cleaned again as it grows (`streaming`): its groups repeat.
@functools.lru_cache(maxsize=4096)
def _group_refs(group: str) -> tuple[int, ...]:
    """The references a marker's group cites; a number that is 0 or starts with 0 is none
    (`[1, 07]` cites 1). A group citing none is no marker (`items[0]`)."""
    refs: list[int] = []
    for part in _PARTS.split(group):
        if _RANGE.fullmatch(part):
            ends = _RANGE_DASH.split(part)
            if all(_numbered(x) for x in ends):
                lo, hi = (int(x) for x in ends)
                refs.extend(range(lo, hi + 1) if 0 < hi - lo < 20 else [lo, hi])
        elif _numbered(part.strip()):
            refs.append(int(part))
    return tuple(refs)


def _numbered(digits: str) -> bool:
    return digits.isdigit() and digits[0] != "0"


def _markers(answer: str, start: int = 0) -> Iterator[re.Match[str]]:
    """REF_GROUP matches from `start` that cite something (see `_group_refs`)."""
    return (m for m in REF_GROUP.finditer(answer, start) if _group_refs(m["refs"]))


def _marker_at(answer: str, pos: int) -> re.Match[str] | None:
    """The marker starting at `pos`, if one does."""
    match = REF_GROUP.match(answer, pos)
    return match if match is not None and _group_refs(match["refs"]) else None


def _prose(answer: str) -> list[tuple[int, int]]:
    """(start, end) of the answer's text outside code, where citation markers live. Code
    is quoted, never cited: blocks (fenced with their fences, indented, unclosed ones to
    the end of their container) and spans, as the markdown parser reads them (escaped
    backticks, unclosed fences in list items and backticks in indented code included)."""
    code, _, autolinks, targets = literal_spans(answer)
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
    prose = _prose(answer)
    # Over the whole answer, not each span's end: there "(?!\()" could not see that a
    # link's "(url)" follows its text, and "[7](url)" would count as [7].
    for match in _markers(answer):
        if _within(prose, match.start("refs") - 1, match.end()):  # its space may be code
            for ref in _group_refs(match["refs"]):
                seen.setdefault(ref, None)
    return list(seen)


def remove_invented_refs(answer: str, valid: set[int]) -> str:
    """Drop references the context did not contain ([9] when only [1]..[4] exist). Only
    citation markers change, with what belonged to a dropped one. Markers joined by spaces
    or a separator form a run ("[1], [9][10]"): its kept markers stay, joined as the model
    joined them ("[1], [9], [2]" → "[1], [2]"), the dropped ones go with their separators
    ("See [1], [9] and more." → "See [1] and more."). A run dropped whole takes the space
    before it when punctuation or a closing delimiter follows ("Never [9]." → "Never.",
    "UTC [9]**" → "UTC**"), what wraps it ("([9])", "**[9]**"), a separator before it
    that only led to it ("Apples, [9]." → "Apples."), and its line if nothing else was on
    it ("- [9]"). Code, brackets that are not citations and everything else stay exactly
    as the model wrote them. Linear in the answer's length (it runs on the event loop)."""
    prose = _prose(answer)
    out: list[str] = []
    tail = ""  # the end of the output so far (`_forms_marker` looks at it)
    pos = scan = 0
    dropped: list[tuple[int, int]] = []
    expected: list[int] = []  # what the cleaned answer cites, marker by marker
    while (match := next(_markers(answer, scan), None)) is not None:
        scan = match.end()
        if not _within(prose, match.start(), match.end()):
            continue
        run, gaps = [match], []
        while (nxt := _marker_at(answer, _GAP.match(answer, run[-1].end()).end())) and (
            _within(prose, nxt.start(), nxt.end())
        ):
            gaps.append(answer[run[-1].end() : nxt.start()])
            run.append(nxt)
        kept = [[r for r in _group_refs(m["refs"]) if r in valid] for m in run]
        if any(kept):
            text = answer[pos : match.start()] + _kept_run(answer, run, gaps, kept)
            expected.extend(r for refs in kept for r in dict.fromkeys(refs))
            pos = scan = run[-1].end()
        else:
            text, end = _dropped_run(answer, pos, run)
            if _forms_marker(tail + text, answer, end):
                # What surrounds the run would form a new marker without it ("Step
                # [3[9]] applies." would give "Step [3] applies."): escaped in place.
                text, end = _escaped_run(answer, pos, run), run[-1].end()
            else:
                dropped.append((match.start(), end))
            pos = scan = end
        out.append(text)
        tail = (tail + text)[-_WINDOW:]
    out.append(answer[pos:])
    # Blank edges only: a leading indented code block keeps its indentation (stripped,
    # it would become a paragraph whose "[9]" reads as a citation) ...
    cleaned = _BLANK_HEAD.sub("", "".join(out)).rstrip()
    # ... but space the dropped markers left at the start goes, as does the indentation
    # of a line that continued their paragraph (it would read as code), unless the
    # answer began so.
    first = _first_kept_char(answer, dropped)
    if answer[:1] not in (" ", "\t") and _within(prose, first, first + 1):
        cleaned = cleaned.lstrip(" \t")
    if _citations(cleaned) != expected:
        # A marker formed or lost some other way (a run longer than the window around a
        # dropped one): escape every invented marker in place instead, so the answer never
        # cites what the model did not.
        return _escape_invented(answer, prose, valid)
    return cleaned


# How far around a dropped run `_forms_marker` looks: a marker is a few characters.
_WINDOW = 64


def _forms_marker(before: str, answer: str, end: int) -> bool:
    """Whether the output so far (`before`, its end at least) joined to the answer's text
    from `end` on holds a marker across the join, one the answer did not have."""
    left = before[-_WINDOW:]
    joined = left + answer[end : end + _WINDOW]
    join = len(left)
    return any(
        m.start("refs") - 1 < join < m.end() and _group_refs(m["refs"])
        for m in REF_GROUP.finditer(joined, max(0, join - _WINDOW))
    )


def _escaped_run(answer: str, pos: int, run: list[re.Match[str]]) -> str:
    """The text from `pos` to the end of a run citing nothing valid, with each of its
    markers escaped (`\\[9\\]` shows as "[9]" and cites nothing)."""
    out: list[str] = []
    for m in run:
        out.append(answer[pos : m.start("refs") - 1])
        out.append(f"\\[{m['refs']}\\]")
        pos = m.end()
    return "".join(out)


def _citations(answer: str) -> list[int]:
    """Every reference of every marker outside code, in order, repeats included."""
    prose = _prose(answer)
    return [
        ref
        for match in _markers(answer)
        if _within(prose, match.start("refs") - 1, match.end())
        for ref in _group_refs(match["refs"])
    ]


def _escape_invented(answer: str, prose: list[tuple[int, int]], valid: set[int]) -> str:
    """`answer` with each marker outside code that cites nothing valid escaped (`\\[9\\]`
    shows as "[9]" and cites nothing) and the invalid numbers left out of the others."""
    out: list[str] = []
    pos = 0
    for match in _markers(answer):
        if not _within(prose, match.start("refs") - 1, match.end()):
            continue
        refs = [r for r in _group_refs(match["refs"]) if r in valid]
        inner = ", ".join(map(str, dict.fromkeys(refs))) if refs else None
        out.append(answer[pos : match.start("refs") - 1])
        out.append(f"[{inner}]" if inner else f"\\[{match['refs']}\\]")
        pos = match.end()
    out.append(answer[pos:])
    return "".join(out)


def _first_kept_char(answer: str, dropped: list[tuple[int, int]]) -> int:
    """Where the answer's first character that is neither space nor dropped is."""
    at = 0
    for start, end in dropped:
        if answer[at:start].strip():
            break
        at = end
    return len(answer) - len(answer[at:].lstrip())


def _within(prose: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether [start, end) lies inside one prose span (sorted, disjoint)."""
    i = bisect.bisect_right(prose, (start, float("inf"))) - 1
    return i >= 0 and prose[i][0] <= start and end <= prose[i][1]


def _kept_run(answer: str, run: list[re.Match[str]], gaps: list[str], kept: list[list[int]]) -> str:
    """A run's kept markers, each joined to the previous kept one by the first separator
    between them, or else their widest space ("[1][9], [2]" → "[1], [2]")."""
    pieces: list[str] = []
    last = -1
    for i, refs in enumerate(kept):
        if not refs:
            continue
        if last >= 0:
            between = gaps[last:i]
            pieces.append(next((g for g in between if g.strip()), max(between, key=len)))
        pieces.append("[" + ", ".join(str(r) for r in dict.fromkeys(refs)) + "]")
        last = i
    lead = run[0]["space"]
    first = next(i for i, refs in enumerate(kept) if refs)
    if first and not lead:
        # The dropped markers before it stood right after the text: the kept marker
        # keeps the space it had, and always one after a bracket ("[docs][9] [1]" must
        # not become the reference link "[docs][1]"); after "(", "**", a line start: none.
        before = answer[run[0].start() - 1 : run[0].start()]
        if before == "]":
            lead = " "
        elif before.isalnum() and any(g.strip(" \t") != g for g in gaps[:first]):
            # Not after CJK, which runs its markers on ("日本[9] [1]。" → "日本[1]。").
            lead = "" if unicodedata.east_asian_width(before) in ("W", "F") else " "
    after = run[-1].end()
    if last < len(run) - 1 and answer[after : after + 1] == "[":
        # Dropped markers stood between the kept one and a bracket: "[1] [9][x](u)" must
        # not become "[1][x](u)": a space stays.
        pieces.append(" ")
    return lead + "".join(pieces)


def _dropped_run(answer: str, pos: int, run: list[re.Match[str]]) -> tuple[str, int]:
    """What replaces the text from `pos` to the end of a run dropped whole (the text
    before it, and its leading space only if a word follows), and where that end is."""
    inner, end = _unwrapped(answer, run[0].start("refs") - 1, run[-1].end())
    start = inner
    while start > 0 and answer[start - 1] in _SPACES:
        start -= 1
    whole_line = _dropped_line(answer, pos, start, end)
    if whole_line is not None:
        return whole_line
    return _dropped_inline(answer, pos, start, inner, end)


def _unwrapped(answer: str, inner: int, end: int) -> tuple[int, int]:
    """The span [inner, end) of a dropped run widened over what wraps it: "([9])",
    "(**[9]**)"."""
    wrapped = True
    while wrapped:
        wrapped = False
        for opener, closer in _WRAPPERS:
            if answer.startswith(closer, end) and answer[inner - len(opener) : inner] == opener:
                inner, end, wrapped = inner - len(opener), end + len(closer), True
                break
    return inner, end


def _dropped_line(answer: str, pos: int, start: int, end: int) -> tuple[str, int] | None:
    """`_dropped_run` when the run goes with its line: a "Sources:" label that cites
    nothing else, or a line (or list item) holding nothing else, which would otherwise
    split a paragraph, make the next line code or leave an empty bullet. None otherwise."""
    line_start = answer.rfind("\n", 0, start) + 1
    tail = _LABEL_TAIL.match(answer, end)
    if tail and pos <= line_start and _SOURCES_LABEL.match(answer, line_start, start):
        return answer[pos:line_start], tail.end()  # "Sources: [9]." with no marker kept
    if end < len(answer) and answer[end] not in "\r\n":
        return None
    if pos <= line_start and _LIST_ITEM.match(answer, line_start, start):
        end += 2 if answer.startswith("\r\n", end) else 1 if end < len(answer) else 0
        return answer[pos:line_start], end
    return None


def _dropped_inline(answer: str, pos: int, start: int, inner: int, end: int) -> tuple[str, int]:
    """`_dropped_run` within a line: the run's space stays only before a word, and a
    separator that only led to it goes ("Apples, [9]." → "Apples.")."""
    space = answer[start:inner]
    if answer[end : end + 1] == " " and (start == 0 or answer[start - 1] in "\n\r"):
        end += 1  # "[9] Backups run." at a line's start: no space is left behind
    prefix = answer[pos:start]
    after = answer[end : end + 1]
    before = _SEPARATOR_BEFORE.search(answer, max(pos, start - 16), start)
    if before and (not after or after in _CLOSERS):
        prefix, space = answer[pos : before.start()], ""
    keep_space = after and not after.isspace() and after not in _CLOSERS
    return prefix + (space if keep_space else ""), end


def used_citations(answer: str, citations: list[Citation]) -> list[Citation]:
    """The citations the (cleaned) answer actually cites, in reference order."""
    refs = set(cited_refs(answer))
    return [c for c in citations if c.ref in refs]
