"""`convert_file`: titles, tags, text files stored as written, and every per-file error."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

import pytest
from docx import Document
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from api.chunking import MarkdownChunker
from api.importing import SUPPORTED_EXTENSIONS, ImportFileError, convert_file
from tests.importing.hostile import pdf_with_to_unicode


def make_pdf(pages: list[list[str]], *, title: str | None = None, password: str = "") -> bytes:
    """A real PDF with one Helvetica text line per string (pypdf writes it)."""
    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    for lines in pages:
        page = writer.add_blank_page(612, 792)
        ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
        for line in lines:
            escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            ops.append(f"({escaped}) Tj T*")
        ops.append("ET")
        stream = DecodedStreamObject()
        stream.set_data("\n".join(ops).encode("latin-1"))
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        page.replace_contents(stream)
    if title:
        writer.add_metadata({"/Title": title})
    if password:
        writer.encrypt(user_password=password, algorithm="RC4-128")
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def error_of(filename: str, data: bytes, **kwargs: int) -> ImportFileError:
    with pytest.raises(ImportFileError) as info:
        convert_file(filename, data, **kwargs)
    return info.value


# ── Markdown / text: stored as written ─────────────────────────────────────────


def test_markdown_is_stored_as_written_with_front_matter() -> None:
    source = (
        "---\ntitle: Trip plan\ntags: [Travel, '#Alps', travel]\n---\n\n"
        "# Day one\n\nWalk to the hut.  \n"
    )
    note = convert_file("notes/trip.md", source.encode())
    assert note.content_md == source
    assert note.title == "Trip plan"
    assert note.tags == ["travel", "alps"]
    assert note.source_name == "trip.md"


def test_title_falls_back_to_first_h1_then_file_stem() -> None:
    body = "Intro line\n\n```sh\n# not a heading\n```\n\nSetext Title\n===\n\n# Later H1\n"
    assert convert_file("a.md", body.encode()).title == "Setext Title"
    assert convert_file("My Ideas.v2.markdown", b"no heading here\n").title == "My Ideas.v2"
    # Inline markup in the H1 is reduced to its text.
    assert convert_file("b.md", b"# The *big* `plan`\n").title == "The big plan"


def test_front_matter_title_wins_and_bad_yaml_is_ignored() -> None:
    assert convert_file("a.md", b"---\ntitle: FM\n---\n# H1\n").title == "FM"
    bad = b"---\ntitle: [unclosed\n---\n# From H1\n"
    note = convert_file("a.md", bad)
    assert note.title == "From H1"
    assert note.tags == []
    assert note.content_md == bad.decode()
    # A non-mapping front matter (a YAML list) is no front matter either.
    assert convert_file("a.md", b"---\n- x\n---\n# H\n").title == "H"


def test_front_matter_tags_as_string_or_list() -> None:
    note = convert_file("a.md", b"---\ntags: 'Work, #Urgent  q3'\n---\nbody\n")
    assert note.tags == ["work", "urgent", "q3"]
    note = convert_file("a.md", b"---\ntags:\n  - Project X\n  - 2024\n  - null\n---\nbody\n")
    assert note.tags == ["project x", "2024"]
    assert convert_file("a.md", b"---\ntags:\n---\nbody\n").tags == []


def test_inline_obsidian_tags_outside_code() -> None:
    body = (
        "---\ntags: [alpha]\n---\n"
        "Notes on #Beta and #alpha, nested #area/sub-topic.\n\n"
        "Not tags: `#inline_code`, issue #123, a#b, https://x.org/#frag, \\#escaped.\n\n"
        "```c\n#include <stdio.h>\n```\n\n"
        "- item with #list-tag\n"
    )
    note = convert_file("n.md", body.encode())
    assert note.tags == ["alpha", "beta", "area/sub-topic", "list-tag"]


def test_toml_front_matter_gives_title_and_tags() -> None:
    source = b'+++\ntitle = "Hugo post"\ntags = ["Go", "Web"]\n+++\n\n# An H1\n\nbody\n'
    note = convert_file("post.md", source)
    assert (note.title, note.tags) == ("Hugo post", ["go", "web"])


_BIG = "".join(f"key{i}: value {i}\n" for i in range(5000))  # over 64 KB: content


@pytest.mark.parametrize(
    ("source", "is_front_matter"),
    [
        ("---\ntitle: FM\n---\nbody\n", True),
        ('+++\ntitle = "FM"\n+++\nbody\n', True),
        ("\ufeff---\ntitle: FM\n...\nbody\n", True),
        ("---\rtitle: FM\r---\rbody\r", True),
        ("\n---\ntitle: FM\n---\nbody\n", False),  # not at the very top
        ("intro\n\n---\ntitle: FM\n---\nbody\n", False),
        ("---\n- title: FM\n---\nbody\n", False),  # a list, not a mapping
        ("---\ntitle: FM\nx: [\n---\nbody\n", False),  # does not load
        ("---\ntitle: FM\n" + _BIG + "---\nbody\n", False),
    ],
)
def test_the_importer_reads_exactly_the_front_matter_no_chunk_holds(
    source: str, is_front_matter: bool
) -> None:
    """The chunker leaves front matter out of every chunk and the importer takes title and
    tags from it: one rule (`chunking.front_matter`), so metadata is never both read and
    embedded, nor dropped from the chunks without being read."""
    note = convert_file("a.md", source.encode())
    chunks = MarkdownChunker().chunk_note(note.content_md, "Note")
    held = any("FM" in c.embedding_text for c in chunks)  # content or a heading
    assert (note.title == "FM", held) == (is_front_matter, not is_front_matter)


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_crlf_and_bare_cr_notes_read_like_newline_notes(newline: str) -> None:
    """All three CommonMark line endings give the same title and tags: with bare \\r,
    pulldown-cmark alone missed the front matter and the fence (`#include` became a tag)."""
    body = (
        "---\ntags: [alpha]\n---\nNotes on #Beta.\n\n```c\n#include <stdio.h>\n```\n\n"
        "- item with #list-tag\n\n# Real H1\n\ntext\n"
    )
    source = body.replace("\n", newline).encode()
    note = convert_file("n.md", source)
    assert (note.title, note.tags) == ("Real H1", ["alpha", "beta", "list-tag"])
    assert note.content_md == source.decode()


def test_txt_decodes_utf8_and_drops_bom() -> None:
    note = convert_file("plain.txt", "\ufeffCafé ☕ notes\nline two\n".encode())
    assert note.content_md == "Café ☕ notes\nline two\n"
    assert note.title == "plain"


def test_not_utf8_is_rejected() -> None:
    err = error_of("latin1.txt", "déjà vu".encode("latin-1"))
    assert err.code == "not_utf8"
    assert "byte 1" in err.detail
    assert error_of("notes.md", b"\xff\xfe\x00\x00binary").code == "not_utf8"


# ── Size, emptiness, type ─────────────────────────────────────────────────────


def test_oversized_file_is_rejected_before_parsing() -> None:
    err = error_of("big.md", b"x" * 101, max_bytes=100)
    assert err.code == "too_large"
    assert err.detail == "larger than the per-file limit of 100 bytes"  # not the size read
    assert convert_file("ok.md", b"x" * 100, max_bytes=100).content_md == "x" * 100


@pytest.mark.parametrize("name", ["e.md", "e.txt", "e.html", "e.docx", "e.pdf"])
def test_empty_file_is_rejected(name: str) -> None:
    assert error_of(name, b"").code == "empty"
    assert error_of(name, b" \n\t\n").code == "empty"


def test_html_with_no_text_is_empty() -> None:
    html = b"<html><head><script>x()</script></head><body><nav>menu</nav></body></html>"
    assert error_of("page.html", html).code == "empty"


@pytest.mark.parametrize("name", ["image.png", "sheet.xlsx", "README", "archive.md.zip"])
def test_unsupported_extension(name: str) -> None:
    err = error_of(name, b"some bytes")
    assert err.code == "unsupported_type"
    assert ".md" in err.detail


def test_extensions_are_case_insensitive() -> None:
    assert convert_file("LOUD.MD", b"# Up\n").title == "Up"
    assert SUPPORTED_EXTENSIONS == {".md", ".markdown", ".txt", ".html", ".htm", ".docx", ".pdf"}


def test_windows_upload_path_is_reduced_to_the_file_name() -> None:
    note = convert_file("C:\\Users\\me\\Desktop\\todo.txt", b"buy milk\n")
    assert note.source_name == "todo.txt"
    assert note.title == "todo"


# ── Lying or damaged files ────────────────────────────────────────────────────


def test_docx_that_is_not_a_zip_is_corrupt() -> None:
    err = error_of("report.docx", b"%PDF-1.4 this is really a pdf")
    assert err.code == "corrupt_file"
    assert "zip" in err.detail


def test_zip_without_word_document_is_corrupt() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("hello.txt", "not a docx")
    assert error_of("fake.docx", buf.getvalue()).code == "corrupt_file"


def test_truncated_docx_is_corrupt() -> None:
    doc = Document()
    doc.add_paragraph("text")
    buf = io.BytesIO()
    doc.save(buf)
    assert error_of("cut.docx", buf.getvalue()[:3000]).code == "corrupt_file"


def test_docx_zip_bomb_is_too_large() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"<" + b" " * 20_000_000 + b">")
    data = buf.getvalue()
    assert len(data) < 100_000
    assert error_of("bomb.docx", data, max_bytes=100_000).code == "too_large"


def test_pdf_without_header_is_corrupt() -> None:
    err = error_of("scan.pdf", b"<html><body>not a pdf</body></html>")
    assert err.code == "corrupt_file"


def test_damaged_pdf_is_corrupt() -> None:
    data = make_pdf([["hello"]])
    assert error_of("broken.pdf", data[:40]).code == "corrupt_file"


def test_binary_html_is_corrupt() -> None:
    assert error_of("x.html", b"PK\x03\x04\x00\x00binary\x00zip").code == "corrupt_file"


# ── PDF ──────────────────────────────────────────────────────────────────────


def test_pdf_text_per_page_with_metadata_title() -> None:
    data = make_pdf(
        [
            ["Quarterly report", "Revenue grew (a lot) this quarter.", "# not a heading"],
            ["Second page", "====="],
        ],
        title="Q3 Report",
    )
    note = convert_file("q3.pdf", data)
    assert note.title == "Q3 Report"
    assert note.content_md == (
        "Quarterly report\nRevenue grew (a lot) this quarter.\n\\# not a heading"
        "\n\nSecond page\n\\====="
    )


def test_pdf_title_falls_back_to_file_name() -> None:
    assert convert_file("minutes.pdf", make_pdf([["text"]])).title == "minutes"


def test_pdf_with_no_text_is_empty() -> None:
    err = error_of("scan.pdf", make_pdf([[], []]))
    assert err.code == "empty"
    assert "scanned" in err.detail


def test_pdf_glyph_mapped_to_a_lone_surrogate_becomes_a_replacement_character() -> None:
    """One glyph whose ToUnicode entry is a surrogate code failed the whole file with
    "content_md is not valid Unicode"; a pair still reads as its char."""
    data = pdf_with_to_unicode(b"ABC", {0x41: b"D800", 0x42: b"0042", 0x43: b"D83DDE00"})
    note = convert_file("glyphs.pdf", data)
    assert note.content_md == "\ufffdB😀"
    note.content_md.encode("utf-8")  # storable


def test_password_protected_pdf_is_reported() -> None:
    err = error_of("secret.pdf", make_pdf([["classified"]], password="hunter2"))
    assert err.code == "encrypted"


def test_error_serialises_for_api_bodies() -> None:
    err = error_of("x.exe", b"MZ")
    assert err.to_dict() == {"code": "unsupported_type", "detail": err.detail}
    assert str(err).startswith("unsupported_type: ")


def _png_1x1() -> bytes:
    """A valid 1×1 RGB PNG, built by hand so no image library is needed."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def test_docx_images_are_not_embedded_as_base64() -> None:
    doc = Document()
    doc.add_heading("Chart", level=1)
    doc.add_picture(io.BytesIO(_png_1x1()))
    doc.add_paragraph("Caption text.")
    buf = io.BytesIO()
    doc.save(buf)
    note = convert_file("chart.docx", buf.getvalue())
    assert "data:" not in note.content_md and "base64" not in note.content_md
    assert note.content_md.startswith("# Chart\n\n")
    assert note.content_md.endswith("Caption text.")
