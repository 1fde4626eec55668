"""Hypothesis generators of hostile input for the chunker and the importers.

Chunker: arbitrary Unicode (lone surrogates, NUL, every line separator Python knows),
"markdown soup" (syntax fragments glued together without the block structure the chunker
tests' `markdown_docs` respects: fences inside quotes inside lists, setext underlines after
tables, stray pipes, unbalanced HTML), and real READMEs cut up and spliced.

Importers: arbitrary bytes under every extension (and some unsupported ones), bytes behind a
format's magic number, and the real fixtures mutated — bytewise, and for .docx inside the
zip, member by member, so the mutations reach mammoth's XML handling rather than stopping
at the zip checksum.
"""

from __future__ import annotations

import io
import zipfile
from functools import cache
from pathlib import Path

from hypothesis import strategies as st

from api.chunking import STRATEGIES
from api.importing import SUPPORTED_EXTENSIONS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

# ── chunker ──────────────────────────────────────────────────────────────────────────

ODD_CHARS = st.sampled_from(
    [
        "\x00", "\r", "\r\n", "\n", "\t", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029",
        "\ufeff", "\u200b", "\u200d", "\u0301", "\u3000", "\u00a0", "\ud800", "\udfff",
        "\U0001f469\u200d\U0001f4bb", "\u202e", "\ufffd", "#", "`", "|", ">", "-", "*",
    ]
)  # fmt: skip
arbitrary_text = st.lists(st.one_of(st.characters(), ODD_CHARS), max_size=2000).map("".join)

MD_FRAGMENTS = st.sampled_from(
    [
        "# ", "## ", "###### ", "####### ", "#", " #", "   # ", "    # ",
        "```", "~~~", "````", "```python", "~~~ {.rust}", "`", "``",
        "\n", "\n", "\n", "\n\n", "\r\n", "\r", "  \n", "    ", "\t",
        "> ", ">", "> > ", "- ", "* ", "+ ", "1. ", "1) ", "   - ", "- [ ] ", "- [x] ",
        "|", "| a | b |", "|---|---|", "| --- |", ":-:|", "---", "===", "***", "___", "- - -",
        "+++", "title: x", "...",
        "<div>", "</div>", "<!--", "-->", "<pre>", "</pre>", "<script>", "<br>", "<br/>",
        "[x]: /u", "[x]", "![i](/a.png)", "[^1]", "[^1]: foot", "<http://a.b>",
        "**", "_", "\\", "&amp;", "&#0;", "$$", "{{", "}}",
        "word", "words and more words", "Sentence one. Sentence two!", "e.g. 3.14 a/b",
        "日本語の文章。", "中文", "😀", "שלום", "مرحبا", "\u0301", "\u200d", "\x00", "\ufeff",
        "\u3000", "\u00a0", "supercalifragilistic" * 4, "x" * 300, "word " * 80,
    ]
)  # fmt: skip
markdown_soup = st.lists(MD_FRAGMENTS, max_size=250).map("".join)


@cache
def corpus() -> tuple[str, ...]:
    """Real markdown documents (the chunker tests' corpus, CommonMark spec included)."""
    folder = FIXTURES / "markdown"
    return tuple(
        p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.md")) if p.name != "SOURCES.md"
    )


@st.composite
def spliced_markdown(draw: st.DrawFn) -> str:
    """Slices of real documents (cut anywhere, even mid-fence or mid-table) glued together."""
    docs = corpus()
    parts = []
    for _ in range(draw(st.integers(1, 6))):
        doc = docs[draw(st.integers(0, len(docs) - 1))]
        start = draw(st.integers(0, len(doc) - 1))
        parts.append(doc[start : start + draw(st.integers(0, 3000))])
    text = draw(st.sampled_from(["", "\n", "```\n", "> "])).join(parts)
    return text.replace("\n", "\r\n") if draw(st.integers(0, 4)) == 0 else text


chunk_titles = st.one_of(st.sampled_from(["Note", "", "Title > arrows", "🎉 标题"]), st.text())
chunk_params = st.tuples(st.sampled_from(STRATEGIES), st.sampled_from([10, 50, 300]))
CHUNK_INPUTS = {
    "arbitrary_text": arbitrary_text,
    "markdown_soup": markdown_soup,
    "spliced_markdown": spliced_markdown(),
}

# ── importers ────────────────────────────────────────────────────────────────────────

EXTENSIONS = sorted(SUPPORTED_EXTENSIONS)
filenames = st.one_of(
    st.sampled_from(EXTENSIONS).map(lambda ext: "note" + ext),
    st.tuples(
        st.sampled_from(["", "../../etc/passwd", "C:\\Users\\x\\", ".hidden", "名前 ", "a" * 300]),
        st.sampled_from([*EXTENSIONS, ".MD", ".Docx", ".exe", "", ".md.", ".pdf.zip"]),
    ).map("".join),
)
MAGIC = st.sampled_from(
    [
        b"%PDF-1.7\n", b"%PDF-1.4\n1 0 obj\n<<", b"PK\x03\x04", b"PK\x05\x06" + bytes(18),
        b"<!DOCTYPE html><html><body>", b"<h1>", b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff",
        b"\xff\xfe\x00\x00", b"---\ntitle: ", b"# ", b"\x00" * 16,
    ]
)  # fmt: skip
magic_bytes = st.tuples(MAGIC, st.binary(max_size=2048)).map(b"".join)


@cache
def fixture_files() -> dict[str, bytes]:
    """Real documents of every supported kind (importer and chunker fixtures)."""
    folder = FIXTURES / "importing"
    files = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.suffix != ".py"}
    files["fastapi_readme.md"] = (FIXTURES / "markdown" / "fastapi_readme.md").read_bytes()
    return files


@st.composite
def mutated_bytes(draw: st.DrawFn, data: bytes, max_ops: int = 8) -> bytes:
    """`data` after 1..max_ops random edits: flip, overwrite, delete, insert, duplicate,
    truncate."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, max_ops))):
        op = draw(st.sampled_from(["flip", "overwrite", "delete", "insert", "dup", "truncate"]))
        pos = draw(st.integers(0, max(len(buf) - 1, 0)))
        span = draw(st.integers(1, 256))
        if op == "flip" and buf:
            buf[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "overwrite":
            buf[pos : pos + span] = draw(st.binary(min_size=span, max_size=span))
        elif op == "delete":
            del buf[pos : pos + span]
        elif op == "insert":
            buf[pos:pos] = draw(st.binary(min_size=1, max_size=span))
        elif op == "dup":
            buf[pos:pos] = buf[pos : pos + span] * draw(st.integers(1, 50))
        elif op == "truncate":
            del buf[pos:]
    return bytes(buf)


@st.composite
def mutated_fixture(draw: st.DrawFn) -> tuple[str, bytes]:
    """A real file with bytewise damage, under its own name."""
    files = fixture_files()
    name = draw(st.sampled_from(sorted(files)))
    return name, draw(mutated_bytes(files[name]))


_DOCX_CORE = ["[Content_Types].xml", "_rels/.rels", "word/document.xml"]


@st.composite
def mutated_docx(draw: st.DrawFn) -> tuple[str, bytes]:
    """The real .docx re-zipped with one member damaged (or dropped): a valid archive whose
    XML, relationships or content types are wrong."""
    source = zipfile.ZipFile(io.BytesIO(fixture_files()["field-guide.docx"]))
    names = source.namelist()
    # A third of the cases damage a member every reader needs, the rest any member (most
    # only style the document, so their damage imports fine): about as many files import as
    # are refused, so a run of 20 sees both outcomes (tests/fuzz/test_import_fuzz.py).
    any_member = st.sampled_from(names)
    target = draw(st.sampled_from(_DOCX_CORE) | any_member | any_member)
    drop = draw(st.integers(0, 9)) == 0
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in names:
            content = source.read(name)
            if name == target:
                if drop:
                    continue
                content = draw(mutated_bytes(content, max_ops=4))
            archive.writestr(name, content)
    return "field-guide.docx", out.getvalue()


IMPORT_INPUTS = {
    "arbitrary_bytes": st.tuples(filenames, st.binary(max_size=4096)),
    "magic_prefixed": st.tuples(st.sampled_from(EXTENSIONS).map("x".__add__), magic_bytes),
    "mutated_fixtures": mutated_fixture(),
    "mutated_docx_members": mutated_docx(),
}
