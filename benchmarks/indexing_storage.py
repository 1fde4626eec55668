"""(d) embedding API requests per 1 000 chunks, and (e) bytes per stored chunk.

(d) The OpenAI connector (`OpenAIEmbedder`, real `openai` client) against the local
OpenAI-compatible stub (`tests/stubs`), driven by the reconciler: how many HTTP requests it
sends for ~1 000 chunks, (i) as one 1 000-section note and (ii) as 50 notes of 20
sections. Against it, the original design simulated through the same client: one
`embed([text])` call per chunk, in sequence. Requests are counted by the stub.

(e) The same chunk documents (shape of `note_chunks`, from chunking a realistic note)
inserted into two collections — embeddings as BSON binary float32 vectors (what the
reconciler writes, `api.chunk_store.vectors.to_bson_vector`) and as arrays of doubles — for
384 and 1 536 dimensions; `collStats` size/avgObjSize and `bson.encode` length compared.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import bson
import numpy as np
from bson import ObjectId
from pymongo import MongoClient

from api.chunk_store.vectors import to_bson_vector
from api.config import Settings
from benchmarks.indexing_notes import paragraph
from benchmarks.service_harness import in_process_app


@dataclass(frozen=True, slots=True)
class RequestsRow:
    """(d): one way of embedding the same chunks, with what it cost."""

    scenario: str
    path: str  # "reconciler (ours)", "embed() only, ...", "original design: ... per chunk"
    chunks: int
    requests: int
    seconds: float

    @property
    def per_1000(self) -> float:
        return self.requests * 1000 / self.chunks if self.chunks else 0.0


def request_scenarios(total_sections: int = 1000) -> dict[str, list[tuple[str, str]]]:
    """Notes (title, markdown) with one chunk per section: one big note, and 20-section notes."""
    import random

    rng = random.Random(11)
    sections = [f"## Topic {i}\n\n{paragraph(rng, (2, 4))}\n" for i in range(total_sections)]
    per_note = 20
    small = [
        (f"Small note {j}", "\n".join(sections[j * per_note : (j + 1) * per_note]))
        for j in range(total_sections // per_note)
    ]
    return {
        f"1 note × {total_sections} sections": [("Big note", "\n".join(sections))],
        f"{len(small)} notes × {per_note} sections": small,
    }


async def run_requests(
    settings: Settings, stub: Any, total_sections: int = 1000
) -> list[RequestsRow]:
    """(d) for every scenario: reconciler, batched embed() alone, one request per chunk."""
    rows: list[RequestsRow] = []
    async with in_process_app(settings) as running:  # settings: OpenAI via the stub, no workers
        headers = await running.new_user()
        embedder = running.container.embedder
        chunker = running.container.chunker
        # Titles differ between scenarios, so do breadcrumbs and hashes: nothing is reused.
        for scenario, notes in request_scenarios(total_sections).items():
            ids = []
            for title, content in notes:
                resp = await running.client.post(
                    "/v1/notes", json={"title": title, "content_md": content}, headers=headers
                )
                resp.raise_for_status()
                ids.append(ObjectId(resp.json()["id"]))
            stub.reset()
            start = time.perf_counter()
            await running.container.indexing.workers.drain(timeout_s=600)
            seconds = time.perf_counter() - start
            texts = [[c.embedding_text for c in chunker.chunk_note(b, t)] for t, b in notes]
            chunks = sum(len(t) for t in texts)
            stored = await running.container.db.note_chunks.count_documents(
                {"note_id": {"$in": ids}}
            )
            if stored != chunks:
                raise RuntimeError(f"{scenario}: {stored} chunks stored, chunker made {chunks}")
            rows.append(
                RequestsRow(
                    scenario,
                    "reconciler (ours)",
                    chunks,
                    len(stub.requests_to("/v1/embeddings")),
                    seconds,
                )
            )
            stub.reset()
            start = time.perf_counter()
            for note_texts in texts:
                await embedder.embed(note_texts)
            rows.append(
                RequestsRow(
                    scenario,
                    "embed() only, one call per note",
                    chunks,
                    len(stub.requests_to("/v1/embeddings")),
                    time.perf_counter() - start,
                )
            )
            stub.reset()
            start = time.perf_counter()
            for note_texts in texts:
                for text in note_texts:
                    await embedder.embed([text])
            rows.append(
                RequestsRow(
                    scenario,
                    "original design: embed([text]) per chunk",
                    chunks,
                    len(stub.requests_to("/v1/embeddings")),
                    time.perf_counter() - start,
                )
            )
    return rows


# -- (e) bytes per chunk ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BytesRow:
    """(e): the same chunk documents stored with one vector encoding."""

    dims: int
    encoding: str  # "binary float32" | "array of doubles"
    count: int
    coll_size: int  # collStats size (uncompressed BSON bytes of the documents)
    avg_obj_size: float  # collStats avgObjSize
    bson_len: float  # mean len(bson.encode(doc)), server-independent
    vector_bytes: int  # bson.encode({"embedding": v}) minus bson.encode({}) for one vector
    storage_size: int  # collStats storageSize as the server reports it


def chunk_docs(chunks: list[Any], dims: int, binary: bool, seed: int = 5) -> list[dict[str, Any]]:
    """`note_chunks` documents for `chunks` with random unit vectors of `dims` dimensions."""
    rng = np.random.default_rng(seed)
    note_id, author_id, now = ObjectId(), ObjectId(), datetime.now(UTC)
    docs = []
    for c in chunks:
        vec = rng.standard_normal(dims).astype(np.float32)
        vec /= np.linalg.norm(vec)
        embedding: Any = to_bson_vector(vec) if binary else vec.astype(np.float64).tolist()
        docs.append(
            {
                "note_id": note_id,
                "author_id": author_id,
                "tags": ["bench", "storage"],
                "note_version": 1,
                "chunk_index": c.chunk_index,
                "total_chunks": c.total_chunks,
                "chunk_position": c.chunk_position,
                "heading_path": list(c.heading_path),
                "section_path": c.section_path,
                "chunk_type": c.chunk_type,
                "content_md": c.content_md,
                "start_offset": c.start_offset,
                "end_offset": c.end_offset,
                "token_count": c.token_count,
                "content_hash": c.content_hash,
                "metadata": dict(c.metadata or {}),
                "embedding": embedding,
                "embedding_model": f"bench@{dims}",
                "created_at": now,
            }
        )
    return docs


def run_bytes(
    mongo_url: str, db_name: str, chunks: list[Any], dims_list: tuple[int, ...] = (384, 1536)
) -> list[BytesRow]:
    """(e): insert both encodings for each dimension; read back the server's statistics."""
    client: MongoClient = MongoClient(mongo_url)
    rows: list[BytesRow] = []
    try:
        db = client[db_name]
        for dims in dims_list:
            for binary, label in ((True, "binary float32"), (False, "array of doubles")):
                name = f"chunks_{dims}_{'binary' if binary else 'doubles'}"
                db.drop_collection(name)
                docs = chunk_docs(chunks, dims, binary)
                db[name].insert_many(docs)  # adds each `_id`, so encode afterwards
                encoded = [len(bson.encode(d)) for d in docs]
                stats = db.command("collStats", name)
                one = docs[0]["embedding"]
                vector_bytes = len(bson.encode({"embedding": one})) - len(bson.encode({}))
                rows.append(
                    BytesRow(
                        dims,
                        label,
                        int(stats["count"]),
                        int(stats["size"]),
                        float(stats["avgObjSize"]),
                        sum(encoded) / len(encoded),
                        vector_bytes,
                        int(stats.get("storageSize", 0)),
                    )
                )
    finally:
        client.close()
    return rows
