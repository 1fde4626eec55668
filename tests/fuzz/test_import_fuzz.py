"""Importer fuzz (always on, bounded): `convert_file` on arbitrary bytes under every
extension, on bytes behind each format's magic number, and on the real fixtures mutated
(bytewise, and member by member inside the .docx zip): only `ImportFileError` with a known
code may escape, within a per-file time limit. Plus hand-made hostile documents."""

from __future__ import annotations

import io
import os
import zipfile

import pytest

from tests.conftest import Api
from tests.fuzz.generators import IMPORT_INPUTS, fixture_files
from tests.fuzz.targets import FuzzStats, fuzz_importer, import_case

EXAMPLES = int(os.environ.get("AUTONOTE_FUZZ_EXAMPLES", "120"))
# Mutated fixtures cost up to ~0.5 s each (the PDF); fewer of them in the always-on run.
HEAVY = {"mutated_fixtures": max(EXAMPLES // 6, 10), "mutated_docx_members": max(EXAMPLES // 6, 10)}


@pytest.mark.parametrize("source", sorted(IMPORT_INPUTS))
def test_importer_fuzz(source: str) -> None:
    stats = FuzzStats(f"import/{source}")
    examples = HEAVY.get(source, EXAMPLES)
    fuzz_importer(source, examples, stats)
    assert stats.cases >= examples
    assert len(stats.outcomes) >= 2, stats.outcomes  # more than one path was exercised


def _zip(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return out.getvalue()


def _docx_with(document_xml: bytes) -> bytes:
    """The real .docx with its body replaced (a structurally valid archive)."""
    source = zipfile.ZipFile(io.BytesIO(fixture_files()["field-guide.docx"]))
    members = {n: source.read(n) for n in source.namelist()}
    members["word/document.xml"] = document_xml
    return _zip(members)


W_NS = b'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def _laughs(levels: int) -> bytes:
    entities = b"".join(
        b'<!ENTITY %s "%s">' % (bytes([98 + i]), (b"&" + bytes([97 + i]) + b";") * 10)
        for i in range(levels)
    )
    return (
        b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">' + entities + b"]>"
        b"<w:document " + W_NS + b"><w:body><w:p><w:r><w:t>&" + bytes([97 + levels]) + b";"
        b"</w:t></w:r></w:p></w:body></w:document>"
    )


def _hostile() -> dict[str, tuple[str, bytes, str, int]]:
    """name -> (filename, bytes, expected outcome, max_bytes)."""
    pdf = fixture_files()["shared-mime-info-spec.pdf"]
    big = 2_000_000
    return {
        # Far past markdownify's recursion limit. Not 100k levels: bs4's html.parser costs
        # ~30-150 us per element here, so nesting is bounded by size like any markup.
        "html nested 20k deep": (
            "d.html",
            b"<div>" * 20_000 + b"x" + b"</div>" * 20_000,
            "too_large",
            big,
        ),
        "html 1 MB in one tag's attributes": (
            "a.html",
            b"<a " + b"x=1 " * 250_000,
            "imported",
            big,
        ),
        "html utf-16 with bom": (
            "u.html",
            "\ufeff<h1>T</h1><p>x</p>".encode("utf-16"),
            "imported",
            big,
        ),
        "html only a script": ("s.html", b"<script>" + b"alert(1);" * 1000, "empty", big),
        # 2 MB of XML in a 20 KB-limit import: inflation check, before anything is parsed.
        "docx zip bomb": (
            "z.docx",
            _docx_with(b"<w:document " + W_NS + b">" + b" " * 2**21),
            "too_large",
            20_000,
        ),
        # expat's amplification guard stops the expansion (memory stays bounded).
        "docx billion laughs": ("l.docx", _docx_with(_laughs(8)), "corrupt_file", big),
        "docx empty zip": ("e.docx", _zip({}), "corrupt_file", big),
        "docx not a zip": ("n.docx", b"PK\x03\x04" + b"\x00" * 100, "corrupt_file", big),
        "pdf header only": ("h.pdf", b"%PDF-1.7\n%%EOF\n", "corrupt_file", big),
        "pdf truncated in half": ("t.pdf", pdf[:70_000], "corrupt_file", big),
        "pdf with a huge xref count": (
            "x.pdf",
            b"%PDF-1.4\nxref\n0 999999999\ntrailer\n<< /Size 999999999 /Root 1 0 R >>\n"
            b"startxref\n9\n%%EOF\n",
            "corrupt_file",
            big,
        ),
        "pdf stream with an unknown filter": (
            "f.pdf",
            pdf.replace(b"/FlateDecode", b"/FlateDecodZ", 1),
            "corrupt_file",
            big,
        ),
        "md invalid utf-8": ("bad.md", b"# Title\n\n\xff\xfe broken", "not_utf8", big),
        "md only whitespace": ("w.md", b" \n\t\r\n ", "empty", big),
        "md nul bytes": ("nul.md", b"# T\x00itle\n\n\x00\x00 text", "imported", big),
        "txt 2 MB of one line": ("big.txt", b"a" * 1_999_000, "imported", big),
        "txt over the limit": ("big.txt", b"a" * 2_000_001, "too_large", big),
        "yaml alias bomb in front matter": (
            "fm.md",
            b"---\na: &a [" + b"*a," * 5000 + b"]\n---\n# x\n",
            "imported",
            big,
        ),
    }


HOSTILE = _hostile()


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_documents(case: str) -> None:
    filename, data, expected, max_bytes = HOSTILE[case]
    stats = FuzzStats("import/hostile")
    assert import_case(filename, data, stats, max_bytes=max_bytes) == expected


async def test_a_hostile_pdf_is_a_per_file_error_not_a_500(api: Api) -> None:
    """Through the API: the bad PDF is reported as that file's error, the good file lands."""
    h = await api.new_user()
    bad = ("pdf with a huge xref count", "pdf stream with an unknown filter")
    files = [("files", (*HOSTILE[case][:2], "application/pdf")) for case in bad]
    files.append(("files", ("ok.md", b"# Fine\n\nA good file.\n", "text/markdown")))
    resp = await api.client.post("/v1/notes/import", files=files, headers=h)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert [e["error"] for e in body["errors"]] == ["corrupt_file", "corrupt_file"]
    assert [i["note"]["title"] for i in body["imported"]] == ["Fine"]
