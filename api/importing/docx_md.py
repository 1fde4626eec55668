"""DOCX → markdown via mammoth's semantic HTML and the shared HTML converter.

Word's "Heading 1".."Heading 6" become `#` headings, "Title" the note title (taken out of the
body), "Quote"/"Intense Quote" block quotes; images become their alt text.
"""

from __future__ import annotations

import io
import zipfile

import mammoth
import structlog
from bs4 import Tag

from api.importing.html_md import parse_html, soup_to_markdown
from api.importing.types import ImportFileError

log = structlog.get_logger(__name__)

_TITLE_CLASS = "autonote-doc-title"
_STYLE_MAP = "\n".join(
    [
        f"p[style-name='Title'] => h1.{_TITLE_CLASS}:fresh",
        *(f"p[style-name='Heading {n}'] => h{n}:fresh" for n in range(1, 7)),
        "p[style-name='Quote'] => blockquote > p:fresh",
        "p[style-name='Intense Quote'] => blockquote > p:fresh",
    ]
)
# A .docx is a zip; refuse archives whose XML would inflate far past the upload limit.
_MAX_INFLATION = 50


def _alt_text_only(image: mammoth.documents.Image) -> dict[str, str]:
    return {"src": "", "alt": image.alt_text or ""}


def _check_archive(data: bytes, max_bytes: int) -> None:
    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise ImportFileError("corrupt_file", "not a .docx document (not a zip archive)")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
            inflated = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ImportFileError("corrupt_file", f"unreadable .docx archive: {exc}") from exc
    if "word/document.xml" not in names:
        raise ImportFileError("corrupt_file", "zip archive has no word/document.xml")
    if inflated > max(max_bytes, len(data)) * _MAX_INFLATION:
        raise ImportFileError("too_large", f"document expands to {inflated} bytes when unpacked")


def docx_to_markdown(data: bytes, *, max_bytes: int = 2_000_000) -> tuple[str, str | None]:
    """Convert a .docx to markdown; returns `(markdown, title)`.

    `title` is the text of the first "Title"-styled paragraph, or None. Raises
    `ImportFileError("corrupt_file")` for anything that is not a readable Word document.
    """
    _check_archive(data, max_bytes)
    try:
        result = mammoth.convert_to_html(
            io.BytesIO(data),
            style_map=_STYLE_MAP,
            convert_image=mammoth.images.img_element(_alt_text_only),
        )
    except MemoryError:  # over the conversion's memory budget: not a damaged file
        raise
    # mammoth surfaces broken XML/relationships as assorted exceptions (KeyError,
    # ParseError, ValueError...); for the importer they all mean one thing.
    except Exception as exc:
        raise ImportFileError(
            "corrupt_file", f"could not read the .docx: {type(exc).__name__}"
        ) from exc
    for message in result.messages:
        log.debug("importing.docx_message", type=message.type, message=message.message)

    soup = parse_html(result.value)
    title: str | None = None
    title_el = soup.find(class_=_TITLE_CLASS)
    if isinstance(title_el, Tag):
        title = " ".join(title_el.get_text(" ").split()) or None
        title_el.decompose()
    # Further "Title" paragraphs (rare) stay in the body as ordinary top-level headings.
    for extra in soup.find_all(class_=_TITLE_CLASS):
        del extra["class"]
    return soup_to_markdown(soup), title
