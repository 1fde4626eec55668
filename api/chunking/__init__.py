"""Heading-aware markdown chunking: a pure library (no I/O, no database, no network, no
imports from the app or its clients; `make lint` checks it).

`MarkdownChunker` is the default `hierarchical_markdown` strategy; `get_chunker` selects a
strategy by name (`CHUNKING_STRATEGY`). The rules every output obeys: `docs/chunking.md`.
"""

from api.chunking.markdown import ALGORITHM_REVISION, MarkdownChunker
from api.chunking.strategies import (
    STRATEGIES,
    Chunker,
    ChunkingStrategy,
    FixedTokenChunker,
    WholeNoteChunker,
    get_chunker,
)
from api.chunking.types import MarkdownChunk

__all__ = [
    "ALGORITHM_REVISION",
    "STRATEGIES",
    "Chunker",
    "ChunkingStrategy",
    "FixedTokenChunker",
    "MarkdownChunk",
    "MarkdownChunker",
    "WholeNoteChunker",
    "get_chunker",
]
