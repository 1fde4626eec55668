"""The structure-preserving plan's DOCX cases (Task 2), kept as written.

The plan's `extract_text(docx_bytes, "docx")` is our `convert_file(...).content_md`; the
documents are built with python-docx exactly as the plan builds them.
"""

from io import BytesIO

from docx import Document as DocxDocument

from api.importing import convert_file


def extract_text(data: bytes, kind: str) -> str:
    assert kind == "docx"
    return convert_file("plan.docx", data).content_md


def _make_docx_bytes(**kwargs: list) -> bytes:
    """Create a minimal .docx in memory. kwargs: paragraphs list of (text, style)."""
    doc = DocxDocument()
    for text, style in kwargs.get("paragraphs", []):
        doc.add_paragraph(text, style=style)
    for table_data in kwargs.get("tables", []):
        # table_data = list of rows, each row = list of cell strings
        t = doc.add_table(rows=len(table_data), cols=len(table_data[0]))
        for r_idx, row in enumerate(table_data):
            for c_idx, cell_text in enumerate(row):
                t.cell(r_idx, c_idx).text = cell_text
    buf = BytesIO()
    doc.save(buf)
    return buf.getvalue()


def test_docx_heading1_becomes_markdown() -> None:
    docx_bytes = _make_docx_bytes(paragraphs=[("Introduction", "Heading 1")])
    result = extract_text(docx_bytes, "docx")
    assert "# Introduction" in result


def test_docx_heading2_becomes_markdown() -> None:
    docx_bytes = _make_docx_bytes(paragraphs=[("Sub-topic", "Heading 2")])
    result = extract_text(docx_bytes, "docx")
    assert "## Sub-topic" in result


def test_docx_body_paragraph_has_no_prefix() -> None:
    docx_bytes = _make_docx_bytes(paragraphs=[("Just a sentence.", "Normal")])
    result = extract_text(docx_bytes, "docx")
    assert "Just a sentence." in result
    assert "# Just a sentence." not in result


def test_docx_table_becomes_markdown_table() -> None:
    docx_bytes = _make_docx_bytes(tables=[[["Name", "Score"], ["Alice", "95"], ["Bob", "87"]]])
    result = extract_text(docx_bytes, "docx")
    assert "| Name | Score |" in result
    assert "| --- | --- |" in result
    assert "| Alice | 95 |" in result
