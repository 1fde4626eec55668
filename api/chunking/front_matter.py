"""Front matter: the metadata block at the very top of a note, one rule for everyone.

The chunker leaves it out of every chunk and the importer reads title and tags from it, both
through `read_front_matter`: a YAML or TOML block at the very start that loads as a mapping.
Readers parse `bare_cr_as_newline(text)` (same offsets) (docs/chunking.md).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

import yaml

_FRONT_MATTER = re.compile(
    rb"\A(?:\xef\xbb\xbf)?(?:"
    rb"---[ \t]*\r?\n(?![ \t]*\r?\n)(?P<yaml>(?:.*?\r?\n)??)(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)"
    rb"|\+\+\+[ \t]*\r?\n(?P<toml>(?:.*?\r?\n)??)\+\+\+[ \t]*(?:\r?\n|\Z))",
    re.S,
)
_BOM = b"\xef\xbb\xbf"
_BARE_CR = re.compile(r"\r(?!\n)")
_BARE_CR_BYTES = re.compile(rb"\r(?!\n)")
# Larger blocks are not taken for metadata (they stay content): no YAML load of a huge note.
MAX_FRONT_MATTER_BYTES = 64 * 1024
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True, slots=True)
class FrontMatter:
    """Where a note's body starts (a byte offset past BOM and front matter) and the
    front matter's fields ({} when there is none, or it is empty)."""

    end: int
    fields: dict[str, Any] = field(default_factory=dict)


def bare_cr_as_newline(text: str) -> str:
    """`text` with every bare "\\r" (not followed by "\\n") made a "\\n": the same line
    structure for pulldown-cmark, and the same length, so offsets carry over."""
    return _BARE_CR.sub("\n", text)


def read_front_matter(data: bytes) -> FrontMatter:
    """The front matter of a note given as UTF-8 bytes (see module docstring)."""
    if b"\r" in data:
        data = _BARE_CR_BYTES.sub(b"\n", data)
    match = _FRONT_MATTER.match(data)
    if match:
        fields = _load(match["yaml"], match["toml"])
        if fields is not None:
            return FrontMatter(match.end(), fields)
    return FrontMatter(len(_BOM) if data.startswith(_BOM) else 0)


def front_matter_end(data: bytes) -> int:
    """Byte offset just past a leading BOM and front matter block (0 when neither)."""
    return read_front_matter(data).end


def _load(yaml_body: bytes | None, toml_body: bytes | None) -> dict[str, Any] | None:
    """The mapping a delimited block at the top of a note holds ({} when empty), or None
    when it is not metadata (does not load, is not a mapping, or is too large)."""
    body = yaml_body if toml_body is None else toml_body
    if body is None or not body.strip():
        return {}
    if len(body) > MAX_FRONT_MATTER_BYTES:
        return None
    text = body.decode("utf-8", "replace")
    try:
        loaded = tomllib.loads(text) if toml_body is not None else yaml.load(text, _YAML_LOADER)
    except (yaml.YAMLError, tomllib.TOMLDecodeError, ValueError, RecursionError):
        return None
    return loaded if isinstance(loaded, dict) else None


_LEADING_BLOCK = re.compile(
    "\\A\ufeff?(?:"
    r"---[ \t]*\r?\n(?![ \t]*\r?\n)(?:.*?\r?\n)??(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)"
    r"|\+\+\+[ \t]*\r?\n(?:.*?\r?\n)??\+\+\+[ \t]*(?:\r?\n|\Z))",
    re.S,
)


def leading_block_end(text: str) -> int:
    """Characters taken by a delimited block at the very top of `text` that could be front
    matter (the same delimiters as `read_front_matter`, whether or not it loads), else 0.
    Text there must not be rewritten before `read_front_matter` decides: that decision
    depends on the block's size and content."""
    match = _LEADING_BLOCK.match(bare_cr_as_newline(text) if "\r" in text else text)
    return match.end() if match else 0
