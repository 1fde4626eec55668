"""Embedding chunks in one call: `generate_embeddings(chunks)` of the original design.

The chunker stays pure: this module imports no client and does no I/O of its own. The
vectors come from the embedder it is handed (anything with `async embed(texts)` returning
an object with `.vectors`, such as `connectors.embeddings`' `OpenAIEmbedder` and
`LocalEmbedder`). The indexing pipeline does not use it: it reuses vectors by content hash
across versions and batches across notes; this is for scripts and the original chunking
tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from api.chunking.types import MarkdownChunk
from api.tokenizer.encoders import Tokenizer


class VectorBatch(Protocol):
    """What `ChunkEmbedder.embed` returns: one vector per input, in input order."""

    @property
    def vectors(self) -> Any: ...  # a (n, dims) array or a list of n sequences of floats


class ChunkEmbedder(Protocol):
    """The one call `embed_chunks` needs from an embedder."""

    async def embed(self, texts: list[str]) -> VectorBatch: ...


def check_sized_for(embedder: object, tokenizer: Tokenizer, max_input_tokens: int) -> None:
    """Raise ValueError when chunks sized with `tokenizer` and `max_input_tokens` may not
    fit `embedder`: it counts with another tokenizer or takes fewer tokens per input. An
    embedder that does not say (no `tokenizer` / `max_input_tokens`) is trusted."""
    theirs: Tokenizer | None = getattr(embedder, "tokenizer", None)
    limit: int | None = getattr(embedder, "max_input_tokens", None)
    if theirs is not None and theirs.name != tokenizer.name:
        raise ValueError(
            f"the chunks are sized in {tokenizer.name} tokens but the embedder counts "
            f"{theirs.name} tokens: build the chunker with tokenizer=embedder.tokenizer and "
            "max_input_tokens=embedder.max_input_tokens"
        )
    if limit is not None and limit < max_input_tokens:
        raise ValueError(
            f"the chunks' embedding_text may reach {max_input_tokens} tokens but the embedder "
            f"takes at most {limit}: build the chunker with max_input_tokens={limit}"
        )


async def embed_chunks(
    chunks: Sequence[MarkdownChunk],
    embedder: ChunkEmbedder,
    tokenizer: Tokenizer,
    max_input_tokens: int,
) -> list[MarkdownChunk]:
    """Set every chunk's `embedding` to the vector of its `embedding_text` (each distinct
    text embedded once, in one `embed` call) and return the chunks, in order. The chunks
    were sized with `tokenizer` for inputs of up to `max_input_tokens`: `check_sized_for`
    runs first. Nothing is set unless every vector arrived."""
    check_sized_for(embedder, tokenizer, max_input_tokens)
    chunks = list(chunks)
    if not chunks:
        return chunks
    texts = list(dict.fromkeys(c.embedding_text for c in chunks))
    vectors = np.asarray((await embedder.embed(texts)).vectors, dtype=np.float64)
    if vectors.ndim != 2 or len(vectors) != len(texts):
        raise ValueError(f"the embedder returned {vectors.shape} for {len(texts)} texts")
    by_text = dict(zip(texts, vectors.tolist(), strict=True))
    for chunk in chunks:
        chunk.embedding = list(by_text[chunk.embedding_text])
    return chunks
