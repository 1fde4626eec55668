"""A model's answer as it streams, shown only as far as the final answer will keep it (pure).

The final answer is `finish(raw)` (invented references removed, then made safe to render).
What text still to come could change (a "[" until it closes, separators that go with a
marker, an open tag, ...) is held back; before the first such place, `finish` of the text
is a prefix of `finish` of every continuation, and is shown. When a construct outwits
these rules, `close` says to reset and gives the whole final answer. Docs: docs/chat.md.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable

from api.chat.markdown_spans import inline_spans as inline_spans_of

# A marker group at the end, closed or not: "[", "[1", "[1, 2", "[12]".
_MARKER_TAIL = re.compile(r"\[[\d\s,;–-]*\]?\Z")
_MARKER_WINDOW = 512
# What goes with a following dropped marker (wrappers, separators), or opens an image.
_OPENERS = frozenset("([*_~!,;、，；–-<`")


def _prefixes(word: str) -> str:
    """A regex matching every prefix of `word` (the empty one too)."""
    return "".join(f"(?:{c}" for c in word) + ")?" * len(word)


# A line that may still become a list item or a "Sources:" label holding only markers,
# which a dropped marker would take with it.
_LINE_PREFIX = re.compile(
    r"[ \t]*(?:[-*+]|\d{1,9}[.)]?)?[ \t]*"
    r"|(?i:[ \t]*[*_]{0,2}(?:"
    + "|".join(_prefixes(w) for w in ("sources", "references", "citations"))
    + r")[*_]{0,2}[ \t]*:?[*_]{0,2}[ \t]*)"
)
_BLANK_LINE = re.compile(r"(?:\r\n|\r(?!\n)|\n)[ \t]*(?:\r\n|\r|\n)")
# The first line of a link reference definition, its "[label]:" perhaps still to come.
_DEFINITION_START = re.compile(r"(?:[ ]{0,3}(?:>[ ]?|[-*+][ ]+|\d{1,9}[.)][ ]+))*[ ]{0,3}\[")
_DEFINITION_ALONE = re.compile(
    r"(?:[ ]{0,3}(?:>[ ]?|[-*+][ ]+|\d{1,9}[.)][ ]+))*[ ]{0,3}\[(?:[^\[\]\\]|\\.)+\]:[ \t]*\Z"
)
# An opening fence's line: a backtick later on it would make it no fence.
_FENCE_START = re.compile(r"(?:[ ]{0,3}(?:>[ ]?|[-*+][ ]+|\d{1,9}[.)][ ]+))*[ ]{0,3}(?:`{3}|~{3})")
_TAG_START = re.compile(r"[A-Za-z/!?\[]")  # "[": a marker dropped after "<" joins them
_CLOSERS = {"<!--": "-->", "<?": "?>", "<![": "]]>"}


def settled_end(text: str) -> int:
    """How much of the streamed `text` is settled (see module docstring)."""
    end = _tail(text, len(text))
    if end == 0:
        return 0
    code_spans, inline_spans = inline_spans_of(text)
    code, inline = _Spans(code_spans), _Spans(inline_spans)
    literal = _Spans(code_spans + inline_spans)
    while True:
        before = end
        # Never inside a code span, tag or link: its end is what makes it one.
        end = _tail(text, inline.start_around(end))
        start, stop = _paragraph(text, code, end)
        holds = (
            _open_bracket(text, start, stop, code, inline),
            _after_open_backticks(text, start, stop, code),
            _open_tag(text, start, stop, literal),
            _open_line(text, end),
            _open_lead(text, code),
        )
        for hold in holds:
            if hold is not None and hold < end:
                end = _tail(text, hold)
        if end in (before, 0):
            return end


def _tail(text: str, end: int) -> int:
    """`end` moved back over what a marker still to come could change."""
    while True:
        before = end
        while end > 0 and text[end - 1].isspace():
            end -= 1
        marker = _MARKER_TAIL.search(text, max(0, end - _MARKER_WINDOW), end)
        if marker:
            end = marker.start()
        while end > 0 and text[end - 1] in _OPENERS:
            end -= 1
        if end > 0 and text[end - 1] == "]":  # what follows decides: "(url)", "[ref]"
            end = _opener(text, end - 1)
        line = _line_start(text, end)
        if line < end and _LINE_PREFIX.fullmatch(text, line, end):
            end = line
        if end == before:
            return end


def _opener(text: str, close: int) -> int:
    """Where the "[" matching the "]" at `close` is (within a window), or `close`."""
    depth = 0
    for i in range(close, max(-1, close - _MARKER_WINDOW), -1):
        if text[i] == "]":
            depth += 1
        elif text[i] == "[":
            depth -= 1
            if depth == 0:
                return i
    return close


def _line_start(text: str, pos: int) -> int:
    return max(text.rfind("\n", 0, pos), text.rfind("\r", 0, pos)) + 1


class _Spans:
    """Character spans (code, say), merged, for "which span holds i" in log time."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for a, b in sorted(spans):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        self.starts = [a for a, _ in merged]
        self.ends = [b for _, b in merged]

    def skip(self, i: int) -> int:
        """The end of the span holding `i`, or `i`."""
        k = bisect_right(self.starts, i) - 1
        return self.ends[k] if k >= 0 and i < self.ends[k] else i

    def start_around(self, i: int) -> int:
        """The start of the span that `i` falls strictly inside, or `i`."""
        k = bisect_left(self.starts, i) - 1
        return self.starts[k] if k >= 0 and i < self.ends[k] else i


def _paragraph(text: str, code: _Spans, end: int) -> tuple[int, int]:
    """Where the paragraph holding `end` starts and stops: blank lines outside code bound
    it (nothing before it can change what follows, nor anything after it what precedes)."""
    start, stop = 0, len(text)
    for blank in _BLANK_LINE.finditer(text):
        if code.skip(blank.start()) != blank.start():
            continue
        if blank.end() <= end:
            start = blank.end()
        elif blank.start() >= end:
            stop = blank.start()
            break
    return start, stop


_BRACKETS = re.compile(r"[\\\[\]]")
_BACKTICK_THEN = re.compile(r"[\\`\[<]")


def _open_bracket(text: str, start: int, stop: int, code: _Spans, inline: _Spans) -> int | None:
    """The first "[" of the paragraph [start, stop) (outside code) that may still open a
    link or image, or be a marker whose next character is not known yet. Once a blank
    line ended the paragraph, every bracket in it is settled. A closed "(...)" after a
    "]" is skipped only when the parser read a link there: otherwise ("[1](- [)") its
    brackets are text like any other."""
    if stop < len(text):
        return None
    stack: list[int] = []
    i = start
    while (found := _BRACKETS.search(text, i, stop)) is not None:
        i = found.start()
        if code.skip(i) != i:
            i = code.skip(i)
            continue
        c = text[i]
        i += 2 if c == "\\" else 1
        if c == "[":
            stack.append(i - 1)
        elif c == "]" and stack:
            opener = stack.pop()
            if i >= stop:
                return min([*stack, opener])
            if text[i] == "(":
                close = _destination_end(text, i)
                if close is None:
                    return min([*stack, opener])
                if inline.skip(opener) >= close:
                    i = close
    return min(stack) if stack else None


def _destination_end(text: str, i: int) -> int | None:
    """After the ")" that closes the "(" at `i`, or None while it is open."""
    depth = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _after_open_backticks(text: str, start: int, stop: int, code: _Spans) -> int | None:
    """After a backtick run that may still open a code span (a later one may close it):
    the first "[" or "<" of the open paragraph, which code would keep as written."""
    if stop < len(text):
        return None
    opened = False
    i = start
    while (found := _BACKTICK_THEN.search(text, i, stop)) is not None:
        i = found.start()
        if code.skip(i) != i:
            i = code.skip(i)
            continue
        c = text[i]
        if c == "`":
            opened = True
        elif c != "\\" and opened:
            return i
        i += 2 if c == "\\" else 1
    return None


def _open_tag(text: str, start: int, stop: int, literal: _Spans) -> int | None:
    """The first "<" of the open paragraph that may still open a tag, comment or autolink:
    not read as one yet, and what would close it is not there."""
    if stop < len(text):
        return None
    i = text.find("<", start)
    while i >= 0:
        nxt = text[i + 1 : i + 2]
        if literal.skip(i) == i and (not nxt or _TAG_START.match(nxt)):
            closer = next((c for o, c in _CLOSERS.items() if text.startswith(o, i)), ">")
            if text.find(closer, i + 1) < 0:
                return i
        i = text.find("<", i + 1)
    return None


# An answer's first kept character, a backtick after indentation ("\n `x`", "[9]\n  `x`"):
# the final answer keeps that indentation only if the backtick opens code.
_INDENTED_LEAD = re.compile(r"(?:\s|\[[\d\s,;–-]*\])*[ \t]`")


def _open_lead(text: str, code: _Spans) -> int | None:
    """0 while the answer's first kept character is an indented backtick that may still
    open a code span or not (its paragraph is open); unless the answer began indented."""
    lead = _INDENTED_LEAD.match(text)
    if lead is None or text[:1] in (" ", "\t"):
        return None
    tick = lead.end() - 1
    if code.skip(tick) != tick or _paragraph(text, code, tick)[1] < len(text):
        return None
    return 0


def _open_line(text: str, end: int) -> int | None:
    """The start of the line `end` cuts, when the rest of the line decides what the line
    is: a link reference definition (junk after its address makes it text, and its address
    may be dangerous) or an opening fence (a backtick in its info string makes it none);
    or of a definition whose address is on the next line."""
    line = _line_start(text, end)
    if line < end and (_DEFINITION_START.match(text, line) or _FENCE_START.match(text, line)):
        return line
    if line > 0:
        previous = _line_start(text, line - 1)
        if _DEFINITION_ALONE.match(text, previous, line - 1):
            return previous
    return None


class AnswerStream:
    """Feeds a model's deltas through `finish` (raw answer → final answer) and yields what
    may be shown: every piece is final (see module docstring)."""

    def __init__(self, finish: Callable[[str], str]) -> None:
        self._finish = finish
        self._parts: list[str] = []
        self._size = 0
        self._looked = 0
        self._settled = 0
        self.shown = ""

    @property
    def raw(self) -> str:
        """The model's answer so far, as written."""
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def push(self, delta: str) -> str:
        """The text to show after `delta` ("" while it is held back)."""
        self._parts.append(delta)
        self._size += len(delta)
        # Each look re-reads the whole answer: look again once it grew by 1/64, so the
        # looks together read about 64 times its length (linear).
        if self._size - self._looked < self._size >> 6:
            return ""
        self._looked = self._size
        raw = self.raw
        end = settled_end(raw)
        if end <= self._settled:
            return ""
        self._settled = end
        text = self._finish(raw[:end])
        if len(text) <= len(self.shown) or not text.startswith(self.shown):
            return ""
        new, self.shown = text[len(self.shown) :], text
        return new

    def close(self) -> tuple[str, str, bool]:
        """(the final answer, what is left to show, whether the shown text must be reset:
        then what is left to show is the whole final answer)."""
        final = self._finish(self.raw)
        if final.startswith(self.shown):
            return final, final[len(self.shown) :], False
        return final, final, True
