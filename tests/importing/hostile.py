"""Hostile files for the import tests, built in code (no committed binaries): a DOCX whose
XML inflates ~300:1 and a PDF whose pages all share one content stream."""

from __future__ import annotations

import io
import zipfile
import zlib

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def docx_with_paragraphs(n: int, text: str = "lorem ipsum dolor") -> bytes:
    """A minimal valid .docx whose document.xml holds `n` identical paragraphs (~300:1)."""
    para = f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>".encode()
    body = (
        f'<?xml version="1.0"?><w:document xmlns:w="{W_NS}"><w:body>'.encode()
        + para * n
        + b"</w:body></w:document>"
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0"?>'
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" '
            'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-'
            'officedocument.wordprocessingml.document.main+xml"/></Types>',
        )
        z.writestr(
            "_rels/.rels",
            '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
            'relationships/officeDocument" Target="word/document.xml"/></Relationships>',
        )
        z.writestr("word/document.xml", body)
    return buf.getvalue()


def pdf(pages: int, content: bytes, *, compress: bool = True, title: str | None = None) -> bytes:
    """A PDF with `pages` pages that all share ONE content stream `content` (Helvetica as F1)."""
    stream = zlib.compress(content, 9) if compress else content
    filt = b"/Filter /FlateDecode " if compress else b""
    objs: list[bytes] = []
    objs.append(b"<< /Type /Catalog /Pages 2 0 R >>")  # 1
    kids = b" ".join(b"%d 0 R" % (6 + i) for i in range(pages))
    objs.append(b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % pages)  # 2
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")  # 3
    objs.append(
        b"<< /Length %d " % len(stream) + filt + b">>\nstream\n" + stream + b"\nendstream"
    )  # 4
    info = b"<< >>" if title is None else b"<< /Title (" + title.encode("latin-1") + b") >>"
    objs.append(info)  # 5
    for _ in range(pages):
        objs.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>"
        )
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % i + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1))
    for off in offsets:
        out.write(b"%010d 00000 n \n" % off)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R /Info 5 0 R >>\nstartxref\n%d\n%%%%EOF\n"
        % (len(objs) + 1, xref)
    )
    return out.getvalue()


def text_ops(n: int, word: bytes = b"Hello world") -> bytes:
    return b"BT /F1 12 Tf 72 700 Td " + (b"(" + word + b") Tj T* ") * n + b"ET"


def pdf_with_to_unicode(text: bytes, mapping: dict[int, bytes]) -> bytes:
    """A one-page PDF showing `text` in a font whose ToUnicode CMap maps each byte in
    `mapping` to the given UTF-16BE hex (e.g. {0x41: b"D800"}: a lone surrogate)."""
    chars = b"\n".join(b"<%02X> <%s>" % (code, hex_) for code, hex_ in mapping.items())
    cmap = (
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n"
        b"/CMapName /Adobe-Identity-UCS def /CMapType 2 def\n"
        b"1 begincodespacerange <00> <FF> endcodespacerange\n"
        b"%d beginbfchar\n" % len(mapping) + chars + b"\nendbfchar\n"
        b"endcmap CMapName currentdict /CMap defineresource pop end end"
    )
    content = b"BT /F1 12 Tf 72 720 Td (" + text + b") Tj ET"
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /ToUnicode 6 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(cmap) + cmap + b"\nendstream",
    ]
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return out
