"""Heading-aware markdown chunking (a pure library: no I/O, no database, no network).

`MarkdownChunker` is the default `hierarchical_markdown` strategy; `get_chunker` selects a
strategy by name (`CHUNKING_STRATEGY`). See DESIGN.md §4 for the rules every output obeys.
"""

from api.services.chunking.markdown import ALGORITHM_REVISION, MarkdownChunker
from api.services.chunking.models import MarkdownChunk
from api.services.chunking.strategies import (
    STRATEGIES,
    Chunker,
    ChunkingStrategy,
    FixedTokenChunker,
    WholeNoteChunker,
    get_chunker,
)
from api.services.chunking.tokenizer import (
    HuggingFaceTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    default_tokenizer,
    tiktoken_tokenizer,
)

__all__ = [
    "ALGORITHM_REVISION",
    "STRATEGIES",
    "Chunker",
    "ChunkingStrategy",
    "FixedTokenChunker",
    "HuggingFaceTokenizer",
    "MarkdownChunk",
    "MarkdownChunker",
    "TiktokenTokenizer",
    "Tokenizer",
    "WholeNoteChunker",
    "default_tokenizer",
    "get_chunker",
    "tiktoken_tokenizer",
]
