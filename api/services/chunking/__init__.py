"""The chunker at the import path the original chunking tests use.

Everything here is `api.chunking` (the pure chunker), except `MarkdownChunker`, which adds
`generate_embeddings`: embedding needs the app's configured embedder, so it lives here and
not in the pure package (`docs/chunking.md`).
"""

from __future__ import annotations

from api.chunking import (
    ALGORITHM_REVISION,
    STRATEGIES,
    Chunker,
    ChunkingStrategy,
    FixedTokenChunker,
    MarkdownChunk,
    WholeNoteChunker,
    get_chunker,
)
from api.chunking import MarkdownChunker as PureMarkdownChunker
from api.services.chunking.embedding import ChunkEmbedder, embed_chunks
from api.tokenizer import (
    HuggingFaceTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    default_tokenizer,
    tiktoken_tokenizer,
)


class MarkdownChunker(PureMarkdownChunker):
    """`api.chunking.MarkdownChunker` with `generate_embeddings`."""

    async def generate_embeddings(
        self,
        chunks: list[MarkdownChunk],
        api_key: str | None = None,
        *,
        embedder: ChunkEmbedder | None = None,
    ) -> list[MarkdownChunk]:
        """Set each chunk's `embedding` to the vector of its `embedding_text` and return the
        chunks. `embedder` does the I/O; without one, OpenAI's with `api_key`, or else the
        embedder the environment configures (OpenAI when `OPENAI_API_KEY` is set, else the
        local model), is built for this call and closed after. Raises ValueError, before
        any request, when the chunks were sized for another tokenizer or a longer input than
        the embedder takes (nothing is truncated), and the embedder's error when it gives up."""
        if not chunks:
            return chunks
        if embedder is not None:
            return await embed_chunks(chunks, embedder, self.tokenizer, self.max_input_tokens)
        # Imported here: importing the chunker loads no client
        # (test_importing_the_chunker_loads_no_client).
        from api.providers import environment_embedder

        async with environment_embedder(api_key) as configured:
            return await embed_chunks(chunks, configured, self.tokenizer, self.max_input_tokens)


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
