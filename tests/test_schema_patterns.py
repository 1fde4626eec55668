"""The OpenAPI patterns and the server's validation agree on every whitespace character.

Clients (and schemathesis) validate with the schema's regex, the server with pydantic's Rust
regex; `\\s` means different sets in the two, so a query of U+0085 alone was schema-valid but
rejected with 422. The patterns now spell whitespace out; this pins both sides together.
"""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from api.chat.schemas import ChatRequest
from api.notes.schemas import NoteCreate
from api.retrieval.schemas import SearchRequest
from api.schemas import NON_BLANK, TEXT_PATTERN

# Every character some regex dialect or str.isspace() treats as whitespace, plus controls.
TRICKY = sorted(
    {c for c in map(chr, range(0x3001)) if c.isspace() or re.match(r"\s", c)}
    | {"\ufeff", "\u200b", "\x00", "\x7f", "\x1c"}
)


@pytest.mark.parametrize("char", TRICKY, ids=lambda c: f"U+{ord(c):04X}")
def test_blank_text_is_rejected_by_schema_and_server_alike(char: str) -> None:
    schema_ok = re.search(NON_BLANK, char) is not None
    for build in (lambda: SearchRequest(query=char), lambda: ChatRequest(message=char)):
        try:
            build()
            server_ok = True
        except ValidationError:
            server_ok = False
        assert server_ok == schema_ok, (hex(ord(char)), schema_ok, server_ok)


@pytest.mark.parametrize("char", TRICKY, ids=lambda c: f"U+{ord(c):04X}")
def test_title_pattern_agrees_with_server(char: str) -> None:
    for title in (char, f"x{char}y"):
        schema_ok = re.search(TEXT_PATTERN, title) is not None
        try:
            NoteCreate(title=title, content_md="body")
            server_ok = True
        except ValidationError:
            server_ok = False
        assert server_ok == schema_ok, (title, schema_ok, server_ok)


def test_the_case_schemathesis_found() -> None:
    with pytest.raises(ValidationError):
        SearchRequest(query="\u0085")
    assert re.search(NON_BLANK, "\u0085") is None
    assert re.search(NON_BLANK, "a\u0085") is not None
