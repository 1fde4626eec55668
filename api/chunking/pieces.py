"""Chunks-in-progress: the limits of a section and the `Piece` the splitters produce."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Limits:
    """Token limits for one section (they depend on the size of its breadcrumb)."""

    normal: int  # min(max_chunk_tokens, hard)
    code: int  # a whole code block may reach this (the hard limit when code is preserved)
    table: int  # a whole table may reach this: min(table_max_tokens, hard)
    hard: int  # max_input_tokens minus what the breadcrumb line needs


@dataclass(slots=True)
class Piece:
    """A chunk before finishing: a byte span of the note (whitespace already trimmed by
    moving the offsets) and, for table parts after the first and code fragments only, the
    reconstructed content. `redo(limit)` re-splits the piece with a smaller limit; the
    chunker calls it when the exact token count exceeds what the estimate promised."""

    start: int
    end: int
    kind: str
    limit: int
    est: int
    content: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    redo: Callable[[int], list[Piece]] | None = None
    group: int = 0  # which section (breadcrumb) the piece belongs to
