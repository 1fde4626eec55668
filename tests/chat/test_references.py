"""`remove_invented_refs` and `cited_refs` on the shapes of real model answers, with what the
answer renders as (pyromark, the parser the project uses), and their cost on long
answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyromark
import pytest

from api.chat import references
from api.chat.references import cited_refs, remove_invented_refs


def _html(text: str) -> str:
    return pyromark.html(text, options=pyromark.Options.ENABLE_TABLES)


# --- 1. A marker alone on a line leaves a blank line: the paragraph splits ------------


def test_marker_alone_on_a_line_does_not_turn_the_next_line_into_code() -> None:
    # "[9]" on its own line inside a paragraph; the next (lazy) line is indented. The
    # first-line variant ("[9]\n    continues [1]") is handled; mid-answer it is not.
    raw = "Intro.\n\nBackups run nightly\n[9]\n    see [1] for details."
    out = remove_invented_refs(raw, {1, 2})
    assert "<pre>" not in _html(out), (out, _html(out))
    assert cited_refs(out) == [1], out  # the valid citation must survive


def test_marker_alone_on_a_list_items_line_keeps_the_item_whole() -> None:
    raw = "- Backups run nightly\n  [9]\n      see [1] for details."
    out = remove_invented_refs(raw, {1, 2})
    assert cited_refs(out) == [1], (out, _html(out))


def test_marker_alone_on_a_line_keeps_one_paragraph() -> None:
    raw = "Backups run nightly\n[9]\nand are kept 30 days [1]."
    out = remove_invented_refs(raw, {1, 2})
    assert _html(out).count("<p>") == _html(raw).count("<p>") == 1, (out, _html(out))


# --- 2. A list of bare markers: an emptied item changes the block structure ----------


def test_sources_list_with_an_invented_first_item_does_not_become_a_heading() -> None:
    raw = "Sources:\n- [9]\n- [1]"
    out = remove_invented_refs(raw, {1, 2})
    html = _html(out)
    assert "<h2>" not in html, (out, html)  # "Sources:\n-" is a setext heading


def test_a_list_item_that_held_only_an_invented_marker_leaves_no_empty_bullet() -> None:
    raw = "Sources:\n\n- [9]\n- [1]"
    out = remove_invented_refs(raw, {1, 2})
    assert "<li></li>" not in _html(out), (out, _html(out))


# --- 3. Emphasis around a dropped marker stays behind --------------------------------


def test_bold_around_an_invented_marker_goes_with_it() -> None:
    out = remove_invented_refs("Sources: **[1]**, **[9]**.", {1, 2})
    assert "****" not in out, out


def test_bold_invented_marker_on_its_own_line_leaves_no_horizontal_rule() -> None:
    raw = "Backups run nightly.\n\n**[9]**\n\nRestore with pg_restore [1]."
    out = remove_invented_refs(raw, {1, 2})
    assert "<hr" not in _html(out), (out, _html(out))


def test_double_bracketed_invented_marker_leaves_no_empty_brackets() -> None:
    out = remove_invented_refs("See [1] and [[9]].", {1, 2})
    assert "[]" not in out, out


# --- 4. Ranges written across markers ------------------------------------------------


def test_a_range_across_markers_leaves_no_dangling_dash() -> None:
    for raw in ("See [1]–[3] for details.", "See [1]-[3] for details.", "See [9] – [10]."):
        out = remove_invented_refs(raw, {1, 2})
        assert not any(d in out for d in "–-"), (raw, out)


# --- 4b. No-break and ideographic spaces ----------------------------------------------


def test_no_space_before_punctuation_after_a_nbsp_marker() -> None:
    for raw in ("Voir la note\u00a0[9].", "です\u3000[9]。"):
        out = remove_invented_refs(raw, {1, 2})
        assert out[-2] not in "\u00a0\u3000 ", (raw, out)


# --- 5. Cost: linear in the answer's length -----------------------------------------
# Answers are cleaned on the event loop, so the cleaning must stay linear; how long it
# takes is a benchmark's to measure. Here: the result on 80 000 characters, and the work
# where it can be counted.


def test_many_parenthesised_invented_markers_are_linear() -> None:
    # The spaces before each "([9])" are read backwards, not searched for from position 0.
    raw = "w ([9]) " * 10000  # 80 000 chars
    assert remove_invented_refs(raw, {1}) == " ".join(["w"] * 10000)


class CountedSpans(list[tuple[int, int]]):
    """Prose spans that count every look at one of them."""

    looks = 0

    def __getitem__(self, index: Any) -> Any:
        CountedSpans.looks += 1
        return super().__getitem__(index)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        for span in super().__iter__():
            CountedSpans.looks += 1
            yield span


def test_many_code_spans_with_markers_are_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    # A marker must not walk every prose span: they are found by bisection, a few dozen
    # looks a marker here (walking them is 10 000 a marker).
    prose = references._prose
    monkeypatch.setattr(references, "_prose", lambda answer: CountedSpans(prose(answer)))
    monkeypatch.setattr(CountedSpans, "looks", 0)
    raw = "`c` [9] " * 10000
    assert remove_invented_refs(raw, {1}) == " ".join(["`c`"] * 10000)
    assert cited_refs(raw) == [9]
    assert 0 < CountedSpans.looks <= 100 * 10000, CountedSpans.looks


def test_a_long_stretch_of_spaces_is_linear() -> None:
    # REF_GROUP's leading space group must not be retried at every position of a run.
    raw = "Backups run nightly." + " " * 40000 + "Done."
    assert remove_invented_refs(raw, {1}) == raw and cited_refs(raw) == []


def test_dropping_a_marker_never_forms_a_new_citation() -> None:
    """Dropping '[9]' from '[3[9]]' would form the citation '[3]', which the model never
    made: the invented marker is escaped in place instead."""
    for answer in ("Step [3[9]] applies.", "Step [3 [9]] applies.", "A [2] b [3[9]] c [3]."):
        cleaned = remove_invented_refs(answer, {1, 2, 3})
        assert sorted(cited_refs(cleaned)) == sorted(set(cited_refs(answer)) & {1, 2, 3})
        assert cleaned.count("[3") == answer.count("[3")
        assert "\\[9\\]" in cleaned
    rendered = pyromark.html(remove_invented_refs("Step [3[9]] applies.", {3}))
    assert "Step [3[9]] applies." in rendered


def test_index_zero_is_code_not_a_citation() -> None:
    """'items[0]' lost its '[0]' ('[0]' read as an invented citation); references count
    from 1, so [0] and [07] are not markers at all."""
    answer = "Take items[0], then arr[07] and the note [1]."
    assert remove_invented_refs(answer, {1}) == answer
    assert cited_refs(answer) == [1]


def test_a_new_marker_is_caught_even_where_a_group_lost_a_repeat() -> None:
    """The check compares the citations marker by marker, so '[1, 1]' written as '[1]'
    leaves no room for a '[1]' formed from '[1[9]]'."""
    cleaned = remove_invented_refs("See [1, 1]. Step [1[9]] applies.", {1})
    assert cleaned.count("\\[9\\]") == 1 and cited_refs(cleaned) == [1]
    assert "Step [1\\[9\\]] applies." in cleaned


def test_a_zero_padded_number_does_not_hide_the_rest_of_its_group() -> None:
    """In '[1,07]' only the zero-padded number is ignored: the group stays a marker and its
    valid [1] is kept."""
    assert cited_refs("Backups [1,07].") == [1]
    assert remove_invented_refs("Backups [1,07].", {1}) == "Backups [1]."
    assert remove_invented_refs("Take items[0], arr[00] and [0-2].", {1}) == (
        "Take items[0], arr[00] and [0-2]."
    )


def test_a_sources_label_goes_with_the_markers_it_listed() -> None:
    """`Sources: [9], [10].` with both markers invented goes whole, not as `Sources:.`."""
    for raw, expected in (
        ("Backups run at 02:00 UTC [1].\n\nSources: [9], [10].", "Backups run at 02:00 UTC [1]."),
        ("Backups run nightly [1].\n**References:** [7]\nRestore [1].", None),
        ("Answer [1].\nsources: [9]", "Answer [1]."),
    ):
        out = remove_invented_refs(raw, {1, 2})
        assert "Sources:." not in out and ":." not in out, out
        if expected is not None:
            assert out == expected, out
        else:
            assert out == "Backups run nightly [1].\nRestore [1].", out
    # A label whose markers are kept, or a label with its list on the next lines, stays.
    assert remove_invented_refs("Done [1].\n\nSources: [1], [9].", {1}) == (
        "Done [1].\n\nSources: [1]."
    )
    kept = remove_invented_refs("Done [1].\n\nSources:\n- [1]\n- [9]", {1})
    assert kept.startswith("Done [1].\n\nSources:\n- [1]"), kept
