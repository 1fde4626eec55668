"""Search backends behind one interface: each returns, per retriever ("vector", "keyword"),
the user's best chunks with that retriever's raw score. The user filter is part of every
query (pre-filter); nothing ever retries without it.

- `LocalBackend`: the in-process `LocalIndex` (exact cosine over float32 + SQLite FTS5 BM25),
  fed by `LocalIndexSync`. Serves the embedded default and MongoDB without `mongot`.
- `AtlasBackend`: `$vectorSearch` and `$search` pipelines (api.retrieval.atlas_pipelines).
`api.db.search` chooses between them (SEARCH_BACKEND).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable
from typing import Literal, Protocol

import numpy as np
import structlog
from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from api.retrieval import atlas_pipelines as ap
from api.retrieval.local.index import LocalIndex
from api.retrieval.local.serving import Serving, ServingIndexes
from api.retrieval.types import ChunkData, ChunkHit, SearchFilters

log = structlog.get_logger(__name__)

Mode = Literal["hybrid", "vector", "keyword"]
RetrieverLists = dict[str, list[tuple[ChunkData, float]]]
# The query vector, or the query embedding still on its way: its error is raised by
# `retrieve`; a future that resolves to None means "no vector" (hybrid search whose
# embedding failed ranks by keywords alone).
QueryVector = np.ndarray | asyncio.Future[np.ndarray] | asyncio.Future[np.ndarray | None] | None


async def resolved_vector(vector: QueryVector) -> np.ndarray | None:
    """The query vector, waiting for the embedding when it is still on its way (its error
    or cancellation is raised here)."""
    if vector is None or isinstance(vector, np.ndarray):
        return vector
    return await vector


class SearchBackend(Protocol):
    name: str

    async def retrieve(
        self,
        author_id: ObjectId,
        *,
        query: str,
        vector: QueryVector,
        mode: Mode,
        k: int,
        filters: SearchFilters,
        reading: Serving | None = None,
    ) -> RetrieverLists:
        """The author's top-`k` chunks per retriever used by `mode`, filters applied first.
        `vector` may still be computing: keyword work starts without it. `reading`: the
        index to search, as `reading(author_id)` gave it (the vector is its model's)."""
        ...

    def reading(self, author_id: ObjectId) -> Serving | None:
        """The index the author's search reads now, when it is not the configured
        generation's; None otherwise."""
        ...


class LocalBackend:
    name = "local"

    def __init__(
        self,
        index: LocalIndex,
        *,
        catch_up: Callable[[ObjectId], Awaitable[object]] | None = None,
        serving: ServingIndexes | None = None,
    ) -> None:
        self.index = index
        # Waits for the author's in-process commits not applied yet (LocalIndexSync.catch_up).
        self.catch_up = catch_up
        # Which generation's index each user reads while a new one is built.
        self.serving = serving

    def reading(self, author_id: ObjectId) -> Serving | None:
        if self.serving is None:
            return None
        reading = self.serving.reading(str(author_id))
        return None if reading.configured else reading

    async def retrieve(
        self,
        author_id: ObjectId,
        *,
        query: str,
        vector: QueryVector,
        mode: Mode,
        k: int,
        filters: SearchFilters,
        reading: Serving | None = None,
    ) -> RetrieverLists:
        if self.catch_up is not None:  # while the query is still being embedded
            await self.catch_up(author_id)
        index = self.index if reading is None else reading.index
        use_vector = mode != "keyword" and vector is not None
        use_keyword = mode != "vector"
        query_vector: np.ndarray | concurrent.futures.Future[np.ndarray | None] | None = None
        if use_vector:  # the index thread waits on a thread-side view of the embedding
            query_vector = (
                vector
                if isinstance(vector, np.ndarray)
                else asyncio.run_coroutine_threadsafe(
                    resolved_vector(vector), asyncio.get_running_loop()
                )
            )
        # One consistent state of the index for both lists; numpy and SQLite release the
        # GIL, so the event loop keeps serving while a large matrix is scanned. BM25 ranks
        # while the query embedding is still being computed.
        vec, kw = await asyncio.to_thread(
            index.search_hybrid,
            str(author_id),
            query_vector,
            query if use_keyword else None,
            k_vector=k if use_vector else 0,
            k_keyword=k if use_keyword else 0,
            filters=filters,
        )
        lists: RetrieverLists = {}
        if use_vector:
            lists["vector"] = list(vec)
        if use_keyword:
            lists["keyword"] = list(kw)
        return lists


class AtlasBackend:
    name = "atlas"

    def __init__(self, db: AsyncDatabase, *, vector_index: str, text_index: str) -> None:
        self.chunks = db.note_chunks
        self.vector_index = vector_index
        self.text_index = text_index

    def reading(self, author_id: ObjectId) -> Serving | None:
        """Always the configured generation (Atlas keeps one vector index)."""
        return None

    async def retrieve(
        self,
        author_id: ObjectId,
        *,
        query: str,
        vector: QueryVector,
        mode: Mode,
        k: int,
        filters: SearchFilters,
        reading: Serving | None = None,
    ) -> RetrieverLists:
        # `$search` runs while the query is still being embedded; `$vectorSearch` starts
        # when the vector arrives. Every filter is a pre-filter of the search stage.
        note_ids = [ObjectId(n) for n in filters.note_ids] if filters.note_ids is not None else None
        tags, updated_after = filters.tags, filters.updated_after
        if (note_ids is not None and not note_ids) or (tags is not None and not tags):
            await resolved_vector(vector)  # an embedding failure is still the caller's news
            return {"vector": [], "keyword": []}

        async def run(pipeline: ap.Pipeline) -> list[tuple[ChunkData, float]]:
            cursor = await self.chunks.aggregate(pipeline)
            docs = await cursor.to_list(length=k)
            return [(hit, hit.score) for hit in map(ChunkHit.from_document, docs)]

        async def vector_hits() -> list[tuple[ChunkData, float]] | None:
            ready = await resolved_vector(vector)
            if ready is None:
                return None
            pipeline = ap.vector_search_pipeline(
                self.vector_index,
                ready.astype(float).tolist(),
                author_id,
                limit=k,
                note_ids=note_ids,
                tags=tags,
                updated_after=updated_after,
            )
            return await run(pipeline)

        jobs: dict[str, Awaitable[list[tuple[ChunkData, float]] | None]] = {}
        if mode != "keyword" and vector is not None:
            jobs["vector"] = vector_hits()
        if mode != "vector":
            jobs["keyword"] = run(
                ap.text_search_pipeline(
                    self.text_index,
                    query[: ap.MAX_QUERY_CHARS],
                    author_id,
                    limit=k,
                    note_ids=note_ids,
                    tags=tags,
                    updated_after=updated_after,
                )
            )
        results = await asyncio.gather(*jobs.values())
        lists = {name: hits for name, hits in zip(jobs, results, strict=True) if hits is not None}
        return newest_versions(lists)


def newest_versions(lists: RetrieverLists) -> RetrieverLists:
    """Each note's hits of its newest version only: while a replaced version stays
    searchable, both may match, and a note must not show two versions' text."""
    newest: dict[str, int] = {}
    for hits in lists.values():
        for chunk, _ in hits:
            newest[chunk.note_id] = max(newest.get(chunk.note_id, 0), chunk.note_version)
    return {
        name: [(c, s) for c, s in hits if c.note_version == newest[c.note_id]]
        for name, hits in lists.items()
    }
