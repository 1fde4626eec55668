"""`AnswerStream`: a streamed answer shows only what the final answer keeps. Every split of
real answer shapes, and properties (hypothesis) of the stream against the final cleaner."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.chat.references import cited_refs
from api.chat.service import final_answer
from api.chat.streaming import AnswerStream, settled_end

VALID = {1, 2, 3, 4}


def stream(pieces: list[str], valid: set[int] = VALID) -> tuple[list[str], str, str, bool]:
    """(what each piece showed, what closing showed, the final answer, whether it reset);
    checks on the way that everything shown is a start of the final answer's shape: only
    valid references, never a marker the final answer drops."""
    s = AnswerStream(lambda raw: final_answer(raw, valid))
    shown = []
    for piece in pieces:
        shown.append(s.push(piece))
        assert set(cited_refs(s.shown)) <= valid, s.shown
    final, rest, reset = s.close()
    assert final == final_answer("".join(pieces), valid)
    return shown, rest, final, reset


def splits(text: str) -> list[list[str]]:
    """The text one character a piece, and cut in two at every position."""
    return [list(text)] + [[text[:i], text[i:]] for i in range(1, len(text))]


CASES = [
    ("It runs at 02:00 UTC [1]. See also [9].", "It runs at 02:00 UTC [1]. See also."),
    ("Take items[0] and [0], not [07], then [2].", "Take items[0] and [0], not [07], then [2]."),
    ("Sections [12] and [4].", "Sections and [4]."),
    ("Step [3[9]] applies [1].", "Step [3\\[9\\]] applies [1]."),
    ("Done [2]", "Done [2]"),
    ("Done [9]", "Done"),
    ("See [9]then more [1].", "See then more [1]."),
    ("Apples, [9] and pears [1], [10].", "Apples, and pears [1]."),
    ("**[9]** Backups run ([9]) nightly [[9]] [1].", "Backups run nightly [1]."),
    ("Backups run nightly [1].\n\nSources: [9], [10].", "Backups run nightly [1]."),
    ("- [9]\n- [1] kept\n", "- [1] kept"),
    (
        "Use `items[9]` and\n```\nx = [9]\n```\nthen [2].",
        "Use `items[9]` and\n```\nx = [9]\n```\nthen [2].",
    ),
    (
        "A [docs](http://x/a[9]b) and <http://x/[9]> [3].",
        "A [docs](http://x/a[9]b) and <http://x/[9]> [3].",
    ),
    ("Press the ` key [9] then `x` [1].", "Press the ` key [9] then `x` [1]."),
    ("See [1](http://u) and [1].", "See [1](http://u) and [1]."),
    ("日本[9] [1]。", "日本[1]。"),
    ("[1, 9] and [2-3].", "[1] and [2, 3]."),
    # An indented first backtick: the indentation stays only if it opens code.
    ("\n `code` [1]", " `code` [1]"),
    ("[9]\n  `x` y [1]", "  `x` y [1]"),
    # "(- [)" after "[1]" is no link destination: its "[" may still open a link.
    (
        "Backups[1](- [)[click](javascript:alert(1))",
        "Backups[1](- &#91;)&#91;click](javascript:alert(1))",
    ),
]


@pytest.mark.parametrize(("raw", "expected"), CASES)
def test_every_split_shows_exactly_the_final_answer(raw: str, expected: str) -> None:
    """Markers split across pieces, "[0]", a number past the sections, nested brackets, a
    marker at the very end, text glued after an invented marker, code: the tokens joined
    are the final answer, and no piece ever shows an invented reference."""
    for pieces in splits(raw):
        shown, rest, final, reset = stream(pieces)
        assert final == expected
        assert not reset and "".join(shown) + rest == final, pieces


def test_a_number_is_a_reference_only_when_the_context_has_it() -> None:
    raw = "Both [12] and [4] apply."
    for pieces in splits(raw):
        shown, rest, _, _ = stream(pieces, set(range(1, 13)))
        assert "".join(shown) + rest == "Both [12] and [4] apply."
        shown, rest, _, _ = stream(pieces)
        assert "".join(shown) + rest == "Both and [4] apply."


def test_plain_text_is_shown_as_it_comes() -> None:
    """Words show at once; a trailing space waits for the next word, a "[" for its "]"
    and the character after it."""
    s = AnswerStream(lambda raw: final_answer(raw, VALID))
    assert [s.push(p) for p in ("The", " backup", " runs ", "[", "1", "]", ".")] == [
        "The",
        " backup",
        " runs",
        "",
        "",
        "",
        " [1].",
    ]


def test_what_is_held_back() -> None:
    assert settled_end("Apples, ") == len("Apples")  # ", [9]" would take the comma
    assert settled_end("Note: see (") == len("Note: see")  # "([9])" goes whole
    assert settled_end("Backups run.\nSources:") == len("Backups run.")
    assert settled_end("A `code [9") == len("A `code")  # "`" may still close a code span
    assert settled_end("Look ![x](https://e") == len("Look")  # an image until it closes
    assert settled_end("Say <scr") == len("Say")  # a tag until it closes
    assert settled_end("Done.\n\n[d]: java") == len("Done.")  # a definition's address


# Properties: a realistic answer never needs a reset; any answer ends as the final one.

_PROSE = ["Backups", " run", " nightly", "x", " ", "  ", "\n", "\n\n", ".", ",", ", ", ";", "!"]
_MARKERS = ["[1]", "[2]", "[4]", "[9]", "[10]", "[12]", "[0]", "[07]", "[1, 9]", "[1-2]"]
_MARKUP = ["(", ")", "**", "*", "_", "`", "`code`", "\n```\n", "[docs](http://u)", "- "]
_MARKUP += ["Sources: ", "日本", "、", "![x](https://evil.example/?q=1)"]
_MARKUP += ["[click](javascript:alert(1))", "[", "]"]
# Raw HTML is hostile too: dropping "[9]" from "[9]<b>" makes the line an HTML block,
# which can turn a code fence after it into text and its "[1]" into a citation.
_HOSTILE = ["<b>", "</b>", "<script>", "<", ">", "<!--", "-->", "\\", "[d]: ", "~~~"]
_HOSTILE += ["](", "\r\n", "\r", "|", "#"]
_HOSTILE += ["<http://x/[9]>", "[3[9]]", "    ", "\t", "javascript:x", "1. "]


@st.composite
def streamed_answers(draw: st.DrawFn, alphabet: list[str]) -> list[str]:
    """An answer of `alphabet`'s pieces, cut into random pieces (as a model streams)."""
    raw = "".join(draw(st.lists(st.sampled_from(alphabet), max_size=16)))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(raw) - 1)), max_size=8)))
    bounds = [0, *(c for c in cuts if c < len(raw)), len(raw)]
    return [raw[a:b] for a, b in pairwise(bounds) if b > a]


@settings(max_examples=500, deadline=None, derandomize=True)
@given(streamed_answers(_PROSE + _MARKERS + _MARKUP))
def test_a_realistic_answer_streams_exactly_its_final_answer(pieces: list[str]) -> None:
    shown, rest, final, reset = stream(pieces)
    assert not reset, (pieces, shown, final)
    assert "".join(shown) + rest == final


@settings(max_examples=500, deadline=None, derandomize=True)
@given(streamed_answers(_PROSE + _MARKERS + _MARKUP + _HOSTILE))
def test_any_answer_ends_as_the_final_answer(pieces: list[str]) -> None:
    """Hostile markup may outwit the hold rules (a marker dropped right after "<" joins
    them into an autolink): then `close` resets and gives the whole answer. Either way
    what the client ends with is the final answer, and nothing shown cited a reference
    the context did not hold (checked in `stream`)."""
    shown, rest, final, reset = stream(pieces)
    assert (rest if reset else "".join(shown) + rest) == final
