"""Imported documents chunk well: every chunk's breadcrumb carries the document's headings.

Uses the real `MarkdownChunker` (api.chunking). The module skips itself, with a
reason, only while that chunker is not importable yet (it is written in parallel).
"""

from __future__ import annotations

from io import BytesIO
from pathlib import Path

import pytest
from docx import Document

from api.importing import ImportedNote, convert_file

try:
    from api.chunking import MarkdownChunker
except ImportError as exc:  # pragma: no cover - depends on the chunker having landed
    pytest.skip(
        f"api.services.chunking.MarkdownChunker not importable: {exc}", allow_module_level=True
    )

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "importing"


def chunk(note: ImportedNote) -> list:
    return MarkdownChunker().chunk_note(note.content_md, note.title)


def paths_of(chunks: list) -> list[list[str]]:
    return [list(c.heading_path) for c in chunks]


def has_path_ending(chunks: list, *tail: str) -> bool:
    return any(path[-len(tail) :] == list(tail) for path in paths_of(chunks))


def test_docx_fixture_chunks_carry_section_breadcrumbs() -> None:
    note = convert_file("field-guide.docx", (FIXTURES / "field-guide.docx").read_bytes())
    chunks = chunk(note)
    assert chunks
    assert all(path[0] == note.title for path in paths_of(chunks))
    assert has_path_ending(chunks, "Overview")
    assert has_path_ending(chunks, "Species", "Alpine Chough")
    assert has_path_ending(chunks, "Species", "Wallcreeper", "Identification")
    table_chunk = next(c for c in chunks if "| Species | Site | Count |" in c.content_md)
    assert list(table_chunk.heading_path)[-1] == "Survey Results"
    assert "| --- | --- | --- |" in table_chunk.content_md
    # Every heading of the document shows up in some breadcrumb.
    seen = {h for path in paths_of(chunks) for h in path}
    for heading in ("Overview", "Species", "Alpine Chough", "Wallcreeper", "Survey Results"):
        assert heading in seen


def test_docx_built_in_test_chunks_under_its_headings() -> None:
    doc = Document()
    doc.add_heading("Introduction", level=1)
    doc.add_paragraph("Why we started this project and what it covers.")
    doc.add_heading("Method", level=1)
    doc.add_heading("Sampling", level=2)
    doc.add_paragraph("We sampled forty sites across two seasons.")
    buf = BytesIO()
    doc.save(buf)
    note = convert_file("study.docx", buf.getvalue())
    chunks = chunk(note)
    intro = next(c for c in chunks if "Why we started" in c.content_md)
    sampling = next(c for c in chunks if "forty sites" in c.content_md)
    assert list(intro.heading_path)[-1] == "Introduction"
    assert list(sampling.heading_path)[-2:] == ["Method", "Sampling"]


def test_mdbook_page_chunks_follow_its_sections() -> None:
    name = "rust-book-data-types.html"
    note = convert_file(name, (FIXTURES / name).read_bytes())
    chunks = chunk(note)
    assert all(path[0] == note.title for path in paths_of(chunks))
    assert has_path_ending(chunks, "Data Types", "Scalar Types", "Integer Types")
    assert has_path_ending(chunks, "Data Types", "Compound Types", "The Array Type")
    table = next(c for c in chunks if "| Length | Signed | Unsigned |" in c.content_md)
    assert list(table.heading_path)[-1] == "Integer Types"
    assert "| Architecture-dependent |" in table.content_md  # the table was not cut


def test_rustdoc_page_chunks_follow_its_sections() -> None:
    name = "rustdoc-std-collections.html"
    note = convert_file(name, (FIXTURES / name).read_bytes())
    chunks = chunk(note)
    assert has_path_ending(chunks, "Performance", "Cost of Collection Operations")
    assert has_path_ending(
        chunks, "Correct and Efficient Usage of Collections", "Capacity Management"
    )
    assert not any("§" in h for path in paths_of(chunks) for h in path)
