"""The one interface every embedding provider implements.

The indexer and the search path only see `Embedder`: they never know whether vectors come
from OpenAI or the local ONNX model. Vectors are float32 and L2-normalised, so cosine
similarity is a dot product.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from api.tokenizer.encoders import Tokenizer


@dataclass(frozen=True, slots=True)
class EmbeddingBatch:
    """Vectors for a list of inputs, in input order, and what they cost."""

    vectors: np.ndarray  # shape (n, dimensions), float32, L2-normalised rows
    tokens: int  # tokens billed/processed for these inputs
    requests: int = 1  # provider calls made (for cost/efficiency reporting)


class EmbeddingError(Exception):
    """The provider could not embed the inputs (after its own bounded retries)."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


@runtime_checkable
class Embedder(Protocol):
    """An embedding model the indexer and search can use interchangeably."""

    provider: str  # "openai" | "local"
    model: str  # stored as `embedding_model` on chunks; a change triggers re-indexing
    dimensions: int
    max_input_tokens: int  # inputs longer than this would be truncated by the model
    tokenizer: Tokenizer  # exact sizing of chunks for this model

    async def embed(self, texts: list[str]) -> EmbeddingBatch:
        """Embed `texts` (batched internally); raise `EmbeddingError` when it gives up."""
        ...

    async def aclose(self) -> None:
        """Release clients/sessions."""
        ...
