"""The query's vector for one search: a per-user cache of recent query vectors, and the
embedding still under way as the backend takes it (keyword ranking starts without it)."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np
from bson import ObjectId

from api.retrieval.backends import Mode, QueryVector
from connectors.embeddings.base import EmbeddingError


class QueryEmbeddingCache:
    """A small LRU of query vectors: repeated queries (chat follow-ups, pagination, UIs
    searching as you type) skip the model. Keyed by (user, query): a hit answers faster,
    so a cache shared by all users would tell anyone which questions others just asked."""

    def __init__(self, size: int = 512) -> None:
        self._items: OrderedDict[tuple[ObjectId, str], np.ndarray] = OrderedDict()
        self._size = size

    def get(self, key: tuple[ObjectId, str]) -> np.ndarray | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: tuple[ObjectId, str], value: np.ndarray) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


@dataclass(slots=True)
class PendingEmbedding:
    """The query embedding under way (None in keyword mode) and the vector the backend
    waits for. In hybrid mode a provider error resolves `vector` to None: the backend then
    keeps the keyword list it ranked meanwhile instead of failing."""

    embedding: asyncio.Future[np.ndarray] | None
    vector: QueryVector

    @classmethod
    def start(cls, embed: Callable[[], Awaitable[np.ndarray]], mode: Mode) -> PendingEmbedding:
        """Start embedding the query, unless `mode` ranks by keywords only."""
        if mode == "keyword":
            return cls(None, None)
        embedding = asyncio.ensure_future(embed())
        if mode == "hybrid":
            return cls(embedding, asyncio.ensure_future(_vector_or_none(embedding)))
        return cls(embedding, embedding)

    def cancel(self) -> None:
        """Cancel what is still under way (the backend returned without it)."""
        for pending in (self.vector, self.embedding):
            if isinstance(pending, asyncio.Future) and not pending.done():
                pending.cancel()

    def failure(self) -> EmbeddingError | None:
        """The provider error the embedding ended with, if it did."""
        embedding = self.embedding
        if embedding is None or not embedding.done() or embedding.cancelled():
            return None
        exc = embedding.exception()
        return exc if isinstance(exc, EmbeddingError) else None


async def _vector_or_none(embedding: asyncio.Future[np.ndarray]) -> np.ndarray | None:
    """The query vector, or None when the embedding provider failed."""
    try:
        return await embedding
    except EmbeddingError:
        return None
