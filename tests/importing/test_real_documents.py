"""Real documents (tests/fixtures/importing, see SOURCES.md) through `convert_file`.

Assertions are on each document's actual structure, read off its HTML/DOCX source: the
headings it has, the tables it has, the chrome (menus, scripts, help pop-ups) around it.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from api.importing import ImportedNote, convert_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "importing"


@cache
def imported(name: str) -> ImportedNote:
    """Each fixture is converted once per session (DOCX conversion costs ~1 s)."""
    return convert_file(name, (FIXTURES / name).read_bytes())


def atx_headings(markdown: str) -> list[str]:
    """ATX heading lines outside fenced code, as written."""
    headings: list[str] = []
    fence: str | None = None
    for line in markdown.split("\n"):
        marker = re.match(r"^(`{3,}|~{3,})", line)
        if fence is None and marker:
            fence = marker.group(1)
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None and re.match(r"^#{1,6} ", line):
            headings.append(line)
    return headings


def assert_clean_markdown(md: str) -> None:
    """House rules for every converted document."""
    assert "\n\n\n" not in md
    assert all(line == line.rstrip() for line in md.split("\n") if not line.startswith("    "))
    assert "<script" not in md and "<style" not in md


# ── mdBook page: The Rust Programming Language, "Data Types" ──────────────────


def test_mdbook_page_keeps_its_heading_hierarchy() -> None:
    note = imported("rust-book-data-types.html")
    assert atx_headings(note.content_md) == [
        "## Data Types",
        "### Scalar Types",
        "#### Integer Types",
        "##### Integer Overflow",
        "#### Floating-Point Types",
        "#### Numeric Operations",
        "#### The Boolean Type",
        "#### The Character Type",
        "### Compound Types",
        "#### The Tuple Type",
        "#### The Array Type",
        "#### Array Element Access",
        "#### Invalid Array Element Access",
    ]
    assert_clean_markdown(note.content_md)


def test_mdbook_page_drops_menu_sidebar_help_and_scripts() -> None:
    md = imported("rust-book-data-types.html").content_md
    # The menu bar's <h1>, the keyboard-help pop-up and the theme list sit outside <main>.
    assert "The Rust Programming Language" not in md
    assert "Keyboard shortcuts" not in md
    assert "Ayu" not in md
    # Inline scripts and the sidebar <nav> (with its "Page navigation" links) are gone.
    assert "path_to_root" not in md and "localStorage" not in md
    assert "Previous chapter" not in md and "Next chapter" not in md
    assert md.startswith("## Data Types\n")


def test_mdbook_page_tables_become_gfm_with_header_and_separator() -> None:
    md = imported("rust-book-data-types.html").content_md
    assert "| Length | Signed | Unsigned |\n| --- | --- | --- |\n| 8-bit | `i8` | `u8` |\n" in md
    assert "| Architecture-dependent | `isize` | `usize` |" in md
    assert "| Number literals | Example |\n| --- | --- |\n| Decimal | `98_222` |" in md


def test_mdbook_page_code_blocks_are_fenced_with_their_language() -> None:
    md = imported("rust-book-data-types.html").content_md
    assert "```rust\nfn main() {\n    let x = 2.0; // f64\n" in md
    assert "```console\n$ cargo build\n" in md
    assert md.count("```rust") == 14


def test_mdbook_page_links_kept_and_title_from_html_title() -> None:
    note = imported("rust-book-data-types.html")
    assert "](https://en.wikipedia.org/wiki/Two%27s_complement)" in note.content_md
    # Heading permalinks (<a class="header" href="#data-types">) are unwrapped.
    assert "](#" not in note.content_md
    # No <h1> in <main>: the title comes from <title>.
    assert note.title == "Data Types - The Rust Programming Language"
    assert note.tags == []
    assert note.source_name == "rust-book-data-types.html"


# ── rustdoc page: std::collections ─────────────────────────────────────────────


def test_rustdoc_page_headings_without_permalink_markers() -> None:
    note = imported("rustdoc-std-collections.html")
    headings = atx_headings(note.content_md)
    assert headings[0] == "# Module collections"
    for expected in (
        "## When Should You Use Which Collection?",
        "## Performance",
        "### Cost of Collection Operations",
        "## Correct and Efficient Usage of Collections",
        "### Capacity Management",
        "### Iterators",
        "### Entries",
        "## Structs",
    ):
        assert expected in headings
    # rustdoc's "§" anchors and heading links must not reach the breadcrumbs.
    assert not any("§" in h or "](" in h for h in headings)
    assert "#### Use a `Vec` when:" in headings
    assert note.title == "Module collections"
    assert_clean_markdown(note.content_md)


def test_rustdoc_page_drops_sidebar_and_search_ui() -> None:
    md = imported("rustdoc-std-collections.html").content_md
    assert "rustdoc-vars" not in md
    assert "Settings" not in md and "Help" not in md
    assert "Sections" not in md  # sidebar table of contents


def test_rustdoc_page_complexity_table_is_gfm() -> None:
    md = imported("rustdoc-std-collections.html").content_md
    header = (
        "|  | get(i) | insert(i) | remove(i) | append(Vec(m)) | split\\_off(i) | range | append |"
    )
    assert header + "\n| --- | --- | --- | --- | --- | --- | --- | --- |\n" in md
    rows = [line for line in md.split("\n") if line.startswith("| [`")]
    # The page's one <table>: a row per collection family, 8 cells each.
    assert [row.split("`")[1] for row in rows] == [
        "Vec",
        "VecDeque",
        "LinkedList",
        "HashMap",
        "BTreeMap",
    ]
    assert all(row.count(" | ") == 7 for row in rows)


# ── Texinfo page: libffi manual, "The Basics" ─────────────────────────────────


def test_texinfo_page_drops_its_nav_panels_and_css() -> None:
    note = imported("libffi-the-basics.html")
    md = note.content_md
    assert md.startswith("### 2.1 The Basics\n")
    assert "Next:" not in md and "Up:" not in md
    assert "text/css" not in md and "span.r" not in md
    assert md.endswith("a larger type – usually `ffi_arg`.")
    assert note.title == "The Basics (libffi: the portable foreign function interface library)"
    assert "`ffi_prep_cif` returns a `libffi` status code" in md
    assert_clean_markdown(md)


# ── DOCX written once with python-docx (make_docx.py) ─────────────────────────


def test_docx_fixture_structure() -> None:
    note = imported("field-guide.docx")
    assert note.title == "Field Guide to Alpine Birds"
    assert atx_headings(note.content_md) == [
        "# Overview",
        "# Species",
        "## Alpine Chough",
        "## Wallcreeper",
        "### Identification",
        "# Survey Results",
        "# Equipment",
    ]
    md = note.content_md
    # The "Title" paragraph became the note title, not a body heading.
    assert "Field Guide to Alpine Birds" not in md
    assert "Observers should record **every sighting** with time, altitude and weather." in md
    assert (
        "- Feeds on insects in summer\n- Scavenges near huts in winter\n"
        "- Nests in cliff crevices" in md
    )
    assert "1. Look for the flicking wings\n2. Listen for a thin whistle" in md
    assert (
        "| Species | Site | Count |\n| --- | --- | --- |\n"
        "| Alpine Chough | Col du Lac | 42 |\n| Wallcreeper | North Face | 3 |\n"
        "| Snowfinch | Col du Lac | 17 |" in md
    )
    assert "| Item | Weight |\n| --- | --- |\n| Binoculars | 700 g |" in md
    assert_clean_markdown(md)


# ── PDF: the freedesktop.org Shared MIME-info spec (pdfTeX) ────────────────────


def test_real_pdf_text_by_page() -> None:
    data = (FIXTURES / "shared-mime-info-spec.pdf").read_bytes()
    note = convert_file("shared-mime-info-spec.pdf", data)
    md = note.content_md
    assert md.startswith("Shared MIME-info Database\n")
    assert "1.2. What is this spec?" in md
    assert "whose document element is named mime-info" in md
    assert "\n\n\n" not in md
    # 17 pages, each a block; the running header opens every page.
    assert md.count("Shared MIME-info Database\n") >= 17
    # Its metadata title is empty: the file name is the title.
    assert note.title == "shared-mime-info-spec"
    # Nothing extracted may read as a markdown heading.
    assert not any(re.match(r"^ {0,3}#", line) for line in md.split("\n"))


@pytest.mark.parametrize(
    "name",
    ["rust-book-data-types.html", "rustdoc-std-collections.html", "libffi-the-basics.html"],
)
def test_real_html_is_deterministic(name: str) -> None:
    data = (FIXTURES / name).read_bytes()
    assert convert_file(name, data).content_md == imported(name).content_md
