"""AtlasBackend.retrieve ordering and degradation. Atlas Search is not available here, so the
`note_chunks` collection is a fake at that boundary that records the pipelines it receives;
the pipelines themselves are checked in test_atlas_pipelines.py."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from bson import ObjectId

from api.retrieval.backends import AtlasBackend
from api.retrieval.types import SearchFilters

AUTHOR = ObjectId()


class _Cursor:
    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs = docs

    async def to_list(self, length: int) -> list[dict[str, Any]]:
        return self.docs[:length]


class _AtlasChunks:
    """Answers `$search` and `$vectorSearch` with one chunk each and logs the stage order."""

    def __init__(self) -> None:
        self.log: list[str] = []

    async def aggregate(self, pipeline: list[dict[str, Any]]) -> _Cursor:
        stage = next(iter(pipeline[0]))
        self.log.append(stage)
        doc = {
            "_id": ObjectId(),
            "note_id": ObjectId(),
            "author_id": AUTHOR,
            "note_version": 1,
            "chunk_index": 0,
            "heading_path": ["Note"],
            "content_md": stage,
            "score": 0.5,
        }
        return _Cursor([doc])


def _backend() -> tuple[AtlasBackend, _AtlasChunks]:
    chunks = _AtlasChunks()
    backend = AtlasBackend(
        SimpleNamespace(note_chunks=chunks, notes=None),  # type: ignore[arg-type]
        vector_index="v",
        text_index="t",
    )
    return backend, chunks


async def test_search_runs_while_the_query_is_embedded() -> None:
    backend, chunks = _backend()
    loop = asyncio.get_running_loop()
    embedding: asyncio.Future[np.ndarray] = loop.create_future()

    async def embed_later() -> None:
        await asyncio.sleep(0.05)
        chunks.log.append("embedded")
        embedding.set_result(np.ones(3, dtype=np.float32))

    task = asyncio.ensure_future(embed_later())
    lists = await backend.retrieve(
        AUTHOR, query="pg_dump", vector=embedding, mode="hybrid", k=5, filters=SearchFilters()
    )
    await task
    assert chunks.log == ["$search", "embedded", "$vectorSearch"]
    assert [c.content_md for c, _ in lists["keyword"]] == ["$search"]
    assert [c.content_md for c, _ in lists["vector"]] == ["$vectorSearch"]


async def test_no_vector_means_keyword_only_and_one_search() -> None:
    backend, chunks = _backend()
    done: asyncio.Future[np.ndarray | None] = asyncio.get_running_loop().create_future()
    done.set_result(None)  # what the service passes when the embedding provider failed
    lists = await backend.retrieve(
        AUTHOR, query="pg_dump", vector=done, mode="hybrid", k=5, filters=SearchFilters()
    )
    assert chunks.log == ["$search"] and list(lists) == ["keyword"]


async def test_vector_mode_raises_the_embedding_error() -> None:
    backend, chunks = _backend()
    failed: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
    failed.set_exception(RuntimeError("provider down"))
    with pytest.raises(RuntimeError, match="provider down"):
        await backend.retrieve(
            AUTHOR, query="q", vector=failed, mode="vector", k=5, filters=SearchFilters()
        )
    assert chunks.log == []
    # An empty pre-filter returns early, but the embedding's failure is still reported.
    with pytest.raises(RuntimeError, match="provider down"):
        await backend.retrieve(
            AUTHOR, query="q", vector=failed, mode="vector", k=5, filters=SearchFilters(tags=[])
        )
