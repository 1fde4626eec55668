"""PDF → plain-text markdown with `pypdf` (pure Python, no system libraries).

Text only: one paragraph block per page; headings, lists and tables are not recovered, and
lines markdown would read as structure are escaped.
"""

from __future__ import annotations

import io
import re

import structlog
from pypdf import PdfReader
from pypdf.errors import DependencyError, FileNotDecryptedError

from api.importing.types import ImportFileError

log = structlog.get_logger(__name__)

_PDF_MAGIC = b"%PDF-"
# The header may follow up to 1 KB of junk (PDF 1.7 spec, implementation note 13).
_MAGIC_WINDOW = 1024
_STRUCTURAL_LINE = re.compile(r"^(\s{0,3})(#|=+\s*$|-{3,}\s*$|\*{3,}\s*$|_{3,}\s*$)")


def _escape_structure(line: str) -> str:
    return _STRUCTURAL_LINE.sub(lambda m: m.group(1) + "\\" + m.group(2), line, count=1)


def valid_unicode(text: str) -> str:
    """`text` with each lone surrogate as U+FFFD (a surrogate pair becomes its character).
    pypdf gives one for a glyph whose ToUnicode map names a surrogate code, and a note
    cannot hold it: one such glyph must not fail the whole file."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def _page_text(raw: str) -> str:
    raw = valid_unicode(raw)
    lines = [_escape_structure(line.rstrip()) for line in raw.replace("\r\n", "\n").split("\n")]
    # Blank lines inside a page become paragraph breaks; collapse runs of them.
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def pdf_to_markdown(data: bytes) -> tuple[str, str | None]:
    """Extract a PDF's text; returns `(markdown, title)` with the title from its metadata.

    Raises `ImportFileError` with `corrupt_file` (not a PDF / unreadable) or `encrypted`
    (needs a password). A PDF with no extractable text (a scan) yields "".
    """
    if _PDF_MAGIC not in data[:_MAGIC_WINDOW]:
        raise ImportFileError("corrupt_file", "not a PDF document (no %PDF- header)")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ImportFileError("encrypted", "the PDF is password-protected")
        pages = [_page_text(page.extract_text() or "") for page in reader.pages]
        meta_title = reader.metadata.title if reader.metadata else None
    except (ImportFileError, MemoryError):  # MemoryError: the budget, not the file
        raise
    # DependencyError: AES-encrypted, and the optional crypto library is not installed.
    except (FileNotDecryptedError, DependencyError) as exc:
        raise ImportFileError("encrypted", "the PDF is password-protected") from exc
    # Damaged or hostile PDFs make pypdf raise far more than PdfReadError: other PyPdfError
    # subclasses (LimitReachedError for absurd declared sizes), NotImplementedError (an
    # unknown stream filter), ValueError/KeyError/TypeError/IndexError from deep inside
    # object parsing, even bare Exception. Every one means "cannot read this file" and must
    # fail this file only, never the whole import request (found by tests/fuzz).
    except Exception as exc:
        log.info("importing.pdf_unreadable", error=type(exc).__name__, detail=str(exc)[:200])
        raise ImportFileError(
            "corrupt_file", f"could not read the PDF: {type(exc).__name__}"
        ) from exc
    log.debug("importing.pdf_extracted", pages=len(pages), chars=sum(map(len, pages)))
    title = " ".join(valid_unicode(str(meta_title)).split()) if meta_title else None
    return "\n\n".join(page for page in pages if page), title or None
