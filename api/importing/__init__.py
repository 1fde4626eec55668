"""Document importers: .md/.txt/.html/.docx/.pdf files → markdown notes (pure logic).

Callers (the import route and `autonote import`) use `convert_file` per file and
`iter_import_paths` to expand folders; see `converters` for the rules.
"""

from api.importing.converters import (
    SUPPORTED_EXTENSIONS,
    TEXT_EXTENSIONS,
    ImportedNote,
    ImportErrorCode,
    ImportFileError,
    convert_file,
    html_to_markdown,
    iter_import_paths,
)
from api.importing.docx_md import docx_to_markdown
from api.importing.pdf_text import pdf_to_markdown

__all__ = [
    "SUPPORTED_EXTENSIONS",
    "TEXT_EXTENSIONS",
    "ImportErrorCode",
    "ImportFileError",
    "ImportedNote",
    "convert_file",
    "docx_to_markdown",
    "html_to_markdown",
    "iter_import_paths",
    "pdf_to_markdown",
]
