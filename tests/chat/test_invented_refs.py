"""`remove_invented_refs` and `cited_refs` on model answers: only citation markers change,
each dropped one with what belonged to it; code and non-citation brackets stay as written."""

from __future__ import annotations

import re

import pyromark
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from api.chat.references import cited_refs, remove_invented_refs


def _render_tables(md: str) -> str:
    return pyromark.html(md, options=pyromark.Options.ENABLE_TABLES)


MODEL_REPLY = """Use backoff [1]:

```python
def retry(f):
    for delay in [1, 2, 4]:
        try:
            return f()
        except Error :
            time.sleep(delay)
```

Index the first item with `items[0]` ; is it ready ? Never [9]. Also [2][7], [1](http://u)."""


def test_only_citation_markers_change_in_a_model_answer() -> None:
    """Code, brackets that are not citations and whitespace stay exactly as written:
    indentation is kept, `[0]` and `4` in code stay, a Python list is no citation."""
    cleaned = remove_invented_refs(MODEL_REPLY, {1, 2})
    assert cleaned == MODEL_REPLY.replace(" Never [9].", " Never.").replace("[2][7]", "[2]")
    assert cited_refs(cleaned) == [1, 2]
    assert cited_refs("in `a[3]` and\n```\nb = [4]\n```\n") == []
    assert cited_refs("see [1-3] and [5; 6]") == [1, 2, 3, 5, 6]
    assert remove_invented_refs("Done [4].", {1}) == "Done."


def test_markers_right_after_a_word_and_after_a_dropped_one_still_cite() -> None:
    """`UTC[1]` (and CJK text, which has no space before a marker) cites [1], and dropping
    "[9]" in "nightly [9][1]" keeps "[1]" apart from the word, so it still cites."""
    assert cited_refs("The backup runs at 02:00 UTC[1].") == [1]
    assert cited_refs("バックアップは毎晩実行されます[1]。") == [1]
    assert remove_invented_refs("Backups run nightly [9][1].", {1}) == "Backups run nightly [1]."
    assert remove_invented_refs("see [9] and [1]", {1}) == "see and [1]"


def test_code_ends_where_commonmark_ends_it() -> None:
    """A lone backtick does not pair across a blank line; a closing fence may be longer
    than the opening one or end in \\r\\n; a fence inside a list item is code too."""
    assert cited_refs("Press the ` key [1].\n\nThen type `help` [2].") == [1, 2]
    longer = "Run it [1]:\n```\nmake run\n````\nThen restore [2] (see [9])."
    assert remove_invented_refs(longer, {1, 2}).endswith("Then restore [2] (see).")
    assert cited_refs("Run [1]:\r\n```\r\nx = [5]\r\n```\r\nThen [2].") == [1, 2]
    listed = "1. Make the list:\n\n    ~~~python\n    ids = [1, 2, 9]\n    ~~~\n"
    assert remove_invented_refs(listed, {1, 2}) == listed.strip()


def test_unclosed_fence_in_a_list_item_ends_with_the_item() -> None:
    """The fence ends with its list item, so the marker after it is prose."""
    answer = "- Run:\n  ```sh\n  make\n- Then restart [1]."
    assert cited_refs(answer) == [1]
    assert remove_invented_refs(answer.replace("[1]", "[9]"), {1}).endswith("restart.")


def test_escaped_backtick_opens_no_code_span() -> None:
    assert cited_refs("Escape it as \\` and cite [1], see `x`.") == [1]


def test_backticks_indented_four_spaces_are_indented_code_not_a_fence() -> None:
    assert cited_refs("Example:\n\n    ```\n\nSee [1].") == [1]


def test_answer_opening_with_indented_code_shows_no_invented_ref() -> None:
    """A leading indented code block keeps its indentation (stripped, it would be a
    paragraph whose [9] reads as a citation)."""
    out = remove_invented_refs("    ids = [9]\n\nSee [1].", {1})
    assert cited_refs(out) == [1]


def test_answer_opening_with_indented_code_keeps_its_code() -> None:
    out = remove_invented_refs("    ids = [9]\n\nSee [1].", {1})
    assert "<pre><code>ids = [9]" in _render_tables(out)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Sources: [9], [1].", "Sources: [1]."),
        ("It runs at 02:00 UTC ([9]) [1].", "It runs at 02:00 UTC [1]."),
        ("It runs at 02:00 UTC [1], [9].", "It runs at 02:00 UTC [1]."),
        ("Use the dump [9]`pg_restore --clean` [1].", "Use the dump `pg_restore --clean` [1]."),
        ("毎晩02:00に実行されます [9]。復元は[1]。", "毎晩02:00に実行されます。復元は[1]。"),
        ("**Runs at 02:00 UTC [9]** and [1].", "**Runs at 02:00 UTC** and [1]."),
        ("[9] Backups run [1].\n[9] Next.", "Backups run [1].\nNext."),
        ("Also [1][7], [2](http://u).", "Also [1], [2](http://u)."),
    ],
)
def test_a_dropped_marker_takes_what_belonged_to_it(reply: str, expected: str) -> None:
    """What belonged to a dropped marker goes with it (not "Sources:, [1].", "UTC () [1].",
    "[1],.", "UTC **" without bold, "されます 。")."""
    assert remove_invented_refs(reply, {1, 2}) == expected


def test_code_ended_by_bare_carriage_returns_is_code() -> None:
    """pulldown-cmark misses fences a bare CR ends; the answer is read with each bare CR as
    a line end, as the chunker reads notes: an invented [9] in such code stays, and a [2]
    there is no citation."""
    reply = "It runs nightly [1].\r```\rx = a[9] + a[2]\r```\r"
    assert remove_invented_refs(reply, {1, 2}) == reply.rstrip()
    assert cited_refs(reply) == [1]


def test_every_invented_marker_of_a_chain_goes() -> None:
    """Dropping one marker with its separator does not skip the next: every invented
    marker of "Sources: [9], [10], [11]." goes."""
    valid = {1, 2, 3}
    for raw in ("Sources: [9], [10], [11].", "[9], [8] and [7].", "a [1], [9], [8]."):
        out = remove_invented_refs(raw, valid)
        assert set(cited_refs(out)) <= valid, (raw, out)
    assert remove_invented_refs("[9] [8] Backups run nightly.", valid) == "Backups run nightly."
    assert remove_invented_refs("根拠: [9]、[1]", valid) == "根拠: [1]"


def test_a_marker_in_a_link_address_is_no_citation() -> None:
    for raw in ("See [docs](http://x/a[9]b) now.", "See <http://x/[9]> now."):
        assert remove_invented_refs(raw, {1}) == raw
        assert cited_refs(raw) == []


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("a [9][9].", "a."),
        ("See [9][10] and more.", "See and more."),
        ("x [9] [9].", "x."),
        ("**UTC [9][8]**", "**UTC**"),
        ("Done [9][1].", "Done [1]."),
        ("See [9] [1] now", "See [1] now"),
    ],
)
def test_adjacent_invented_markers_go_with_their_space(raw: str, cleaned: str) -> None:
    """Adjacent invented markers go with the space of the first: "a [9][9]." gives "a.",
    "See [9][10] and more." keeps one space between its words."""
    assert remove_invented_refs(raw, {1, 2}) == cleaned


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("[1], [9].", "[1]."),
        ("See [1], [9] and more.", "See [1] and more."),
        ("See [1], [9][10] and more.", "See [1] and more."),
        ("Sources: [1], [9][10]", "Sources: [1]"),
        ("Done [1]; [9][10].", "Done [1]."),
        ("Done [1], [9] [10].", "Done [1]."),
        ("Apples, [9] and pears", "Apples, and pears"),  # prose's own comma stays
    ],
)
def test_a_separator_after_a_kept_marker_goes_with_the_invented_ones(
    raw: str, cleaned: str
) -> None:
    """The separator joining a kept marker to invented ones goes with them: "See [1],
    [9][10] and more." gives "See [1] and more."."""
    assert remove_invented_refs(raw, {1, 2}) == cleaned


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("Backups run nightly[9] [1].", "Backups run nightly [1]."),
        # Glued, "[docs][1]" is a reference-style link, no citation.
        ("See [docs][9] [1].", "See [docs] [1]."),
        ("x\n[9] [1] Backups run.", "x\n[1] Backups run."),
    ],
)
def test_a_kept_marker_keeps_its_own_space(raw: str, cleaned: str) -> None:
    """Dropping an invented marker with no space before it leaves the kept marker's own
    space."""
    assert remove_invented_refs(raw, {1, 2}) == cleaned


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        # Kept markers stay joined as the model joined them.
        ("See [1], [9], [2].", "See [1], [2]."),
        ("Sources: [1]; [9]; [2]", "Sources: [1]; [2]"),
        ("文[1]、[9]、[2]。", "文[1]、[2]。"),
        ("See [1], [9][10], [2] and more.", "See [1], [2] and more."),
        ("See [1], [9] [2].", "See [1], [2]."),
        # No space after an opening delimiter or at a line start.
        ("Backups run nightly ([9] [1]).", "Backups run nightly ([1])."),
        ("Note: **[9] [1] Backups run nightly.**", "Note: **[1] Backups run nightly.**"),
        ('He said "[9] [1] it runs nightly".', 'He said "[1] it runs nightly".'),
        ("Intro:\n\n[9][10][11]    [1] Backups run nightly.", "Intro:\n\n[1] Backups run nightly."),
        (
            "Intro:\n\n[9], [10], [11]\t[1] Backups run nightly.",
            "Intro:\n\n[1] Backups run nightly.",
        ),
        ("x\n[9][10][11] [1] B", "x\n[1] B"),
        # Never glued to a bracket (a reference link) or, after a space, to a word.
        ("See [docs][9], [1].", "See [docs] [1]."),
        ("Backups run nightly[9], [1].", "Backups run nightly [1]."),
        ("日本[9] [1]。", "日本[1]。"),
        # A dropped marker between a kept one and a link.
        ("[1] [9][1](", "[1] [1]("),
        ("See [1] [9][docs](u).", "See [1] [docs](u)."),
        ("word[9],[1]", "word[1]"),
    ],
)
def test_runs_of_markers_keep_their_kept_markers_as_written(raw: str, cleaned: str) -> None:
    """Kept markers of a run stay joined as written ("See [1], [9], [2]." → "See [1],
    [2]."), "**[9] [1] x**" keeps its bold, and a chain of three invented markers at a
    line start does not turn the kept marker's line into indented code."""
    assert remove_invented_refs(raw, {1, 2}) == cleaned
    assert cited_refs(cleaned) == [r for r in cited_refs(raw) if r in (1, 2)]


def test_a_link_whose_text_is_a_number_is_no_citation() -> None:
    """cited_refs does not read "[7](url)" as [7], also where a prose span ends before the
    link's "("."""
    assert cited_refs("See [7](http://example.com/x).") == []
    assert cited_refs("`x `[1] and [2](u) and [3]") == [1, 3]


_PIECES = ["word", "x", " ", "  ", "\n", "\n\n", "[1]", "[2]", "[9]", "[10]"]
_PIECES += [",", ", ", ";", "、", ".", "(", ")", "**"]


# Derandomized: some inputs make the gluing comparison, not the code, wrong ("[1]([9][1])"
# is a link whose destination holds no citations; "word****[9]****[1]" drops its empty
# emphasis with the marker). The fixed examples cover every piece; other cases are
# pinned in the test above.
@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(_PIECES), max_size=10))
def test_kept_citations_survive_and_are_not_glued(parts: list[str]) -> None:
    """Every kept citation survives, and no kept marker ends glued to a word or bracket
    that it was not glued to once the invented markers' text is deleted."""
    raw = "".join(parts)
    cleaned = remove_invented_refs(raw, {1, 2})
    assert {1, 2} & set(cited_refs(raw)) <= set(cited_refs(cleaned)), (raw, cleaned)
    # An indented line is a code block, whose markers stay as written ("    [9][1]"): the
    # gluing comparison below is about prose.
    assume(not re.search(r"(?m)^(?: {4}|\t)", raw))
    glued = re.compile(r"(?:\w|\])(?=\[[12]\])")
    # An invented marker goes with what wraps it ("**[9]**", "([9])") and a separator
    # right after it: "word[9],[1]" is a run glued to "word" as the model wrote it, and
    # "word[1]" keeps that ("word,[1]" is no better).
    without = re.sub(r"\*\*\[(?:9|10)\]\*\*|\(\[(?:9|10)\]\)|\[(?:9|10)\][,;、]?", "", raw)
    assert len(glued.findall(cleaned)) <= len(glued.findall(without)), (raw, cleaned)


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("\n\n    [10] is code", "    [10] is code"),  # indented code stays code
        ("[9]\n\n    code [9]", "    code [9]"),  # ... after a dropped line too
        ("[9]\n    continues [1]", "continues [1]"),  # a paragraph's lazy line
        ("[9]  Backups run [1].", "Backups run [1]."),
    ],
)
def test_the_first_line_keeps_its_block(raw: str, cleaned: str) -> None:
    """Space at the start is stripped only with what was dropped: "\\n\\n    [10]" (code)
    stays code, not "[10]", an invented citation in prose."""
    assert remove_invented_refs(raw, {1, 2}) == cleaned
    assert set(cited_refs(cleaned)) <= {1, 2}
