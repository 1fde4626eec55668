"""The leaf-section scan that defines gold spans (api.evaluation.sections)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from api.evaluation.sections import all_sections, front_matter_end, leaf_sections, scan_headings


def _texts(md: str) -> list[tuple[int, str]]:
    return [(h.level, h.text) for h in scan_headings(md)]


def _bodies(md: str, title: str = "") -> dict[tuple[str, ...], str]:
    return {s.headings: md[s.span[0] : s.span[1]] for s in leaf_sections(md, title)}


def test_atx_levels_and_closing_hashes() -> None:
    md = "# One\n## Two ##\n### Three #not-closing\n#### Four\t###   \n####### seven\n#nospace\n"
    assert _texts(md) == [(1, "One"), (2, "Two"), (3, "Three #not-closing"), (4, "Four")]


def test_setext_headings_including_multiline_paragraphs() -> None:
    md = "Title here\n==========\n\nfirst line\nsecond line\n---\nbody\n"
    assert _texts(md) == [(1, "Title here"), (2, "first line second line")]
    heading = scan_headings(md)[1]
    assert md[heading.start : heading.end] == "first line\nsecond line\n---\n"


def test_dashes_after_blank_line_list_or_table_are_not_headings() -> None:
    md = "para\n\n---\n\n- item\n---\n\n| a | b |\n|---|---|\n| 1 | 2 |\n---\n\n    code\n---\n"
    assert _texts(md) == []


def test_headings_in_fences_indented_code_quotes_and_lists_are_content() -> None:
    md = (
        "## Real\n"
        "```bash\n# comment\n## not\n```\n"
        "~~~~\n# tilde\n~~~\n# still fenced (closing fence too short)\n~~~~\n"
        "    # indented code\n"
        "> # quoted\n"
        "- # in a list\n"
        "## After\n"
        "```\n# unclosed fence runs to the end\n"
    )
    assert _texts(md) == [(2, "Real"), (2, "After")]


def test_backtick_fence_with_backtick_in_info_string_is_not_a_fence() -> None:
    md = "``` not `a fence\n# Heading\n"
    assert _texts(md) == [(1, "Heading")]


def test_front_matter_is_skipped_and_not_a_section() -> None:
    md = "---\ntitle: x\n# not a heading\n---\nintro text\n\n## A\nbody a\n"
    assert front_matter_end(md) == md.index("intro")
    assert _texts(md) == [(2, "A")]
    assert _bodies(md) == {(): "intro text", ("A",): "body a"}


def test_unclosed_front_matter_is_a_thematic_break() -> None:
    md = "---\n# Heading\ntext\n"
    assert front_matter_end(md) == 0
    assert _texts(md) == [(1, "Heading")]


def test_section_bodies_are_trimmed_own_text_with_breadcrumbs() -> None:
    md = "intro\n\n## A\n\n  a body  \n\n### A1\na1 body\n## B\n### B1\n\nb1\n\n"
    sections = all_sections(md)
    assert [s.headings for s in sections] == [(), ("A",), ("A", "A1"), ("B",), ("B", "B1")]
    assert _bodies(md) == {(): "intro", ("A",): "a body", ("A", "A1"): "a1 body", ("B", "B1"): "b1"}
    empty_b = sections[3]
    assert empty_b.is_empty and empty_b.line == 9


def test_h1_equal_to_title_is_left_out_of_breadcrumbs() -> None:
    md = "# My Note\nintro\n## Part\ntext\n# Other top\nmore\n"
    assert _bodies(md, title="My  note".replace("note", "Note")) == {
        (): "intro",
        ("Part",): "text",
        ("Other top",): "more",
    }
    # Without the title the H1 is an ordinary heading.
    assert ("My Note", "Part") in _bodies(md)


def test_crlf_offsets_point_into_the_original_text() -> None:
    md = "# T\r\n\r\n## A\r\nline one\r\nline two\r\n\r\n## B\r\nb\r\n"
    bodies = _bodies(md, title="T")
    assert bodies == {("A",): "line one\r\nline two", ("B",): "b"}


def test_non_ascii_offsets_are_code_points() -> None:
    md = "## は vs が\n日本語 🐈 text\n"
    (section,) = leaf_sections(md)
    assert section.headings == ("は vs が",)
    assert md[section.span[0] : section.span[1]] == "日本語 🐈 text"


_LINES = st.sampled_from(
    [
        "# H1",
        "## H2",
        "### H3 ###",
        "#### H4",
        "text line",
        "  indented text",
        "",
        "",
        "---",
        "===",
        "```",
        "~~~",
        "- item",
        "> quote",
        "| a | b |",
        "    # code",
        "\t",
        "é 🐈",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINES, max_size=40), st.sampled_from(["\n", "\r\n"]))
def test_sections_partition_the_non_heading_text(lines: list[str], newline: str) -> None:
    md = newline.join(lines)
    sections = all_sections(md, title="H1")
    headings = scan_headings(md)
    spans = [s.span for s in sections]
    # In bounds, ordered, non-overlapping, trimmed.
    assert all(0 <= a <= b <= len(md) for a, b in spans)
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))
    for a, b in spans:
        if a < b:
            assert not md[a].isspace() and not md[b - 1].isspace()
    # Every non-whitespace character outside heading lines and front matter is in a section.
    covered = [False] * len(md)
    for a, b in spans:
        covered[a:b] = [True] * (b - a)
    for h in headings:
        covered[h.start : h.end] = [True] * (h.end - h.start)
    covered[: front_matter_end(md)] = [True] * front_matter_end(md)
    assert all(c or md[i].isspace() for i, c in enumerate(covered))
    # One section per heading, plus the text before the first one.
    assert len(sections) == len(headings) + 1
