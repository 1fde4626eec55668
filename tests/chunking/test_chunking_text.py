"""SourceText: byte/character maps, trimming, cut candidates; front matter detection."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.chunking.parse import front_matter_end
from api.chunking.text import _WS, SourceText, is_ws, sanitize


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=0, max_size=200))
def test_byte_and_character_offsets_round_trip(text: str) -> None:
    src = SourceText(text)
    chars = np.arange(len(text) + 1)
    byte_offsets = src.byte_offsets(chars)
    assert byte_offsets[-1] == len(src.data)
    assert (src.char_offsets(byte_offsets) == chars).all()
    for c in range(0, len(text) + 1, 7):
        assert src.decode(0, int(byte_offsets[c])) == text[:c]


def test_lone_surrogates_become_replacement_characters_one_for_one() -> None:
    assert sanitize("a\ud800b\udfffc") == "a\ufffdb\ufffdc"
    clean = "no surrogates"
    assert sanitize(clean) is clean


def text_of(src: SourceText, span: tuple[int, int]) -> str:
    return src.decode(*span)


def test_trim_removes_unicode_whitespace_too() -> None:
    src = SourceText("\u3000 \x1c\u00a0 body text \u2003\n\u3000")
    assert text_of(src, src.trim(0, len(src))) == "body text"
    blank = SourceText(" \u3000\n\u00a0 ")
    start, end = blank.trim(0, len(blank))
    assert start == end and blank.is_blank(0, len(blank))


def cuts(src: SourceText, kind: str) -> list[str]:
    found = getattr(src, f"{kind}_cuts")(0, len(src))
    return [src.data[int(c) :].decode()[:6] for c in found]


def test_sentence_starts() -> None:
    src = SourceText('One. Two! "Three?" Four e.g. five\nSix.\n\nSeven 三。四！五 … six')
    # "e.g. five" is cut too: abbreviations are not recognised (a documented limitation).
    expected = ['Two! "', '"Three', "Four e", "five\nS", "Seven ", "四！五 … ", "五 … si", " six"]
    assert cuts(src, "sentence") == expected


def test_sentence_ending_in_a_line_break_tag_cuts_after_the_tag() -> None:
    src = SourceText("Done! </br>\nNext one. More! <br /> Last")
    assert cuts(src, "sentence") == ["Next o", "More! ", "Last"]


def test_word_and_line_starts() -> None:
    src = SourceText("ab  cd\nef\n\n gh")
    assert cuts(src, "word") == ["cd\nef\n", "ef\n\n g", "gh"]
    assert cuts(src, "line") == ["ef\n\n g", "\n gh", " gh"]


_CUT_TEXT = st.lists(
    st.sampled_from(
        [
            "One.",
            "two",
            "e.g.",
            "Three?!",
            '"Four."',
            "(x)",
            "三。",
            "四！",
            "…",
            "é",
            "<br>",
            "</br>",
            "<br />",
            "12",
            " ",
            "  ",
            "\n",
            "\n\n",
            "\r",
            "\r\n",
            "\t",
            ".",
            "'",
        ]
    ),
    max_size=60,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(_CUT_TEXT, st.data())
def test_cuts_of_a_span_equal_the_whole_note_cuts_inside_it(text: str, data: st.DataObject) -> None:
    # Small spans are scanned on their own (plus a few bytes before); the result must be
    # exactly the whole-note cuts that fall strictly inside the span.
    whole = SourceText(text)
    n = len(whole)
    start = data.draw(st.integers(0, n))
    end = data.draw(st.integers(start, n))
    expected = whole.compute_cuts(0, n)
    got = whole.compute_cuts(start, end)
    for kind, cuts_all in expected.items():
        inside = cuts_all[(cuts_all > start) & (cuts_all < end)]
        found = got[kind][(got[kind] > start) & (got[kind] < end)]
        assert found.tolist() == inside.tolist(), kind


@settings(max_examples=300, deadline=None)
@given(_CUT_TEXT, st.integers(1, 40))
def test_whole_note_cuts_found_block_by_block_equal_one_scan(text: str, block: int) -> None:
    # A long note is scanned in blocks (kept in the CPU cache); every cut strictly inside
    # the note must be the one-scan cut, whatever block boundary falls next to it.
    src = SourceText(text)
    n = len(src)
    one_scan = src.compute_cuts(0, n)
    by_block = src._whole_note_cuts(block=block)
    for kind, cuts in one_scan.items():
        got = by_block[kind]
        assert got[(got > 0) & (got < n)].tolist() == cuts[(cuts > 0) & (cuts < n)].tolist()


def test_small_spans_reuse_one_scan_and_large_spans_scan_the_whole_note() -> None:
    text = "Intro one. Intro two.\n\n" + "Filler sentence here. " * 200 + "\n\nEnd. Done."
    src = SourceText(text)
    assert src.sentence_cuts(0, 30).tolist() == [11, 23]
    assert src._window is not None and src._window[:2] == (0, 30)  # not the whole note
    assert src.word_cuts(5, 20).tolist() == [6, 11, 17]  # inside the cached window
    assert src._window[:2] == (0, 30)
    whole = src.sentence_cuts(0, len(src))
    assert src._window[:2] == (0, len(src))
    assert whole.tolist() == SourceText(text).compute_cuts(0, len(src))["sentence"].tolist()


@pytest.mark.parametrize(
    ("text", "rest"),
    [
        ("---\ntitle: x\n---\nbody", "body"),
        ("---\r\ntitle: x\r\n...\r\nbody", "body"),
        ("\ufeff---\ntitle: x\n---\n\nbody", "\nbody"),
        ("+++\ntitle = 'x'\n+++\nbody", "body"),
        ("---\n---\nbody", "body"),
        ("---\n\nnot: front matter\n---\nbody", None),  # blank line after the opener
        ("---\ntitle: never closed\nbody", None),
        ("text\n---\ntitle: x\n---\n", None),  # not at the start
        ("\ufeffbody", "body"),
        # Not metadata: it stays content (a break, text or code, a break).
        ("---\n```python\nprint(1)\n```\n---\nafter", None),
        ("---\nJust a sentence.\n---\nbody", None),  # a thematic break + setext heading
        ("---\n- a\n- b\n---\nbody", None),  # YAML, but a list, not a mapping
        ("---\ntitle: [unclosed\n---\nbody", None),  # YAML that does not load
        ("+++\nnot toml\n+++\nbody", None),
        ("---\n" + "k: v\n" * 20_000 + "---\nbody", None),  # over 64 KB: not loaded
    ],
)
def test_front_matter_end(text: str, rest: str | None) -> None:
    data = text.encode()
    end = front_matter_end(data)
    if rest is None:
        assert end == 0
    else:
        assert data[end:].decode() == rest


def _reference_line_start(data: bytes, pos: int, floor: int) -> int:
    return max(max(data.rfind(b"\n", floor, pos), data.rfind(b"\r", floor, pos)) + 1, floor)


def _reference_line_end(data: bytes, pos: int, ceiling: int) -> int:
    for i in range(pos, ceiling):
        if data[i] == 0x0A:
            return i + 1
        if data[i] == 0x0D:
            return i + 2 if i + 1 < ceiling and data[i + 1] == 0x0A else i + 1
    return ceiling


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(st.sampled_from(["a", "bc ", "\n", "\r", "\r\n", "x" * 300, "é"]), max_size=40),
    data=st.data(),
)
def test_line_search_matches_a_plain_scan(parts: list[str], data: st.DataObject) -> None:
    src = SourceText("".join(parts) + "z")
    n = len(src.data)
    a, b = sorted(data.draw(st.integers(0, n)) for _ in range(2))
    pos = data.draw(st.integers(a, b))
    assert src.line_start(pos, a) == _reference_line_start(src.data, pos, a)
    if pos < b:
        assert src.line_end(pos, b) == _reference_line_end(src.data, pos, b)


class _CountingBytes(bytes):
    """bytes that add up the ranges their find/rfind calls are given (an upper bound on
    what they scan)."""

    scanned = 0

    def find(self, sub, start=0, end=None):  # type: ignore[no-untyped-def, override]
        _CountingBytes.scanned += (len(self) if end is None else end) - start
        return super().find(sub, start, end)

    def rfind(self, sub, start=0, end=None):  # type: ignore[no-untyped-def, override]
        _CountingBytes.scanned += (len(self) if end is None else end) - start
        return super().rfind(sub, start, end)


@pytest.mark.parametrize("ending", ["\r", "\r\n", "\n\r"])
def test_line_search_cost_does_not_grow_with_the_distance_to_the_bounds(ending: str) -> None:
    """In a note with "\\r", each search went straight to its bound: with bare "\\r"
    endings the search for "\\n" always reached the section start, quadratic in the note
    (10.9 s for 2 MB of one-line paragraphs). Now a search costs about the line it looks
    through. (Without "\\r", one search for "\\n" stops at the line break it finds.)"""
    src = SourceText(f"line{ending}{ending}" * 20_000)
    src.data = _CountingBytes(src.data)
    _CountingBytes.scanned = 0
    n = len(src.data)
    for pos in range(0, n, 997):
        src.line_start(pos, 0)
        src.line_end(pos, n)
    assert _CountingBytes.scanned < 4 * 256 * (n // 997 + 1)


def test_the_byte_whitespace_test_is_str_isspace_on_ascii() -> None:
    every_byte = np.arange(256, dtype=np.uint8)
    want = [b < 0x80 and chr(b).isspace() for b in range(256)]
    assert is_ws(every_byte).tolist() == want
    assert sorted(_WS) == [b for b in range(256) if want[b]]
