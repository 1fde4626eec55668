"""Search: embed the query once → the backend's per-retriever chunk lists (user pre-filter)
→ reciprocal rank fusion → candidates checked against `notes` (the author's, active, the
chunk's version is the indexed one) → grouped into notes with merged matching sections."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import structlog
from bson import ObjectId

from api import observability as obs
from api.errors import ServiceUnavailable
from api.notes.repository import NotesSearchQueries
from api.providers import embedding_model_key
from api.retrieval.atlas_pipelines import notes_filter_query
from api.retrieval.backends import Mode, RetrieverLists, SearchBackend
from api.retrieval.fusion import fuse_chunk_lists
from api.retrieval.grouping import (
    DEFAULT_MAX_SECTION_CHARS,
    group_by_note,
    newest_version_per_note,
    rank_note_ids,
)
from api.retrieval.local.serving import Serving
from api.retrieval.note_level import NOTE_LEVEL_SCAN, NOTE_LEVEL_WARNING, note_level_results
from api.retrieval.query_embedding import PendingEmbedding, QueryEmbeddingCache
from api.retrieval.recheck import current_notes, section_texts
from api.retrieval.relevance import (
    QueryEvidence,
    model_for,
    query_evidence,
    usable_model,
    with_relevance,
)
from api.retrieval.types import ChunkHit, NoteResult, SearchFilters
from connectors.embeddings.base import EmbeddingError

log = structlog.get_logger(__name__)


class EmbeddingUnavailable(ServiceUnavailable):
    code = "embedding_unavailable"


# Deeper rounds when a crowded candidate list returned too few notes (`_deeper_k`).
DEEPEN_FACTOR = 4
MAX_CANDIDATES = 4000
KEYWORD_ONLY_WARNING = "embedding provider unavailable: keyword results only"
PREVIOUS_MODEL_WARNING = (
    "your notes are being re-indexed with a new embedding model and the previous one is not "
    "available to embed the query: keyword results only until the re-index completes"
)
# Builds an embedder for a model key ("name@dimensions") of an older generation, or None.
QueryEmbedders = Callable[[str], Any]


@dataclass(frozen=True, slots=True)
class RankingConfig:
    """Ranking knobs, defaults chosen on the retrieval dataset's dev split
    (docs/decisions/0005-rrf-k.md). `rrf_k=1`, not the RRF paper's 60: with a few dozen
    candidates per retriever, each retriever's top hits then lead the fused ranking."""

    rrf_k: float = 1.0
    vector_weight: float = 1.0
    keyword_weight: float = 1.0
    candidates: int = 60  # chunks fetched per retriever (at least)
    note_scorer: str = "weighted_max_sum"
    # A merged section's score, from its chunks': their best, so a span of many weak
    # chunks cannot outrank the one chunk holding what was asked for.
    section_scorer: str = "max"


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    results: list[NoteResult]
    took_ms: float
    mode: Mode | Literal["note_level"]
    backend: str
    warning: str | None = None
    # What the candidate lists said about the query (relevance's input); None for the
    # note-level fallback.
    evidence: QueryEvidence | None = None


class RetrievalService:
    """Chunk search grouped to notes, for one user at a time."""

    def __init__(
        self,
        backend: SearchBackend,
        embedder: Any,
        notes: NotesSearchQueries,
        *,
        ranking: RankingConfig | None = None,
        chunking_enabled: bool = True,
        query_embedders: QueryEmbedders | None = None,
    ) -> None:
        self.backend = backend
        self.embedder = embedder
        self.notes = notes
        self.ranking = ranking or RankingConfig()
        self.chunking_enabled = chunking_enabled
        # Embedders of older generations' models, for users whose search still reads one.
        self.query_embedders = query_embedders
        self._cache = QueryEmbeddingCache()

    async def embed_query(
        self, author_id: ObjectId, query: str, embedder: Any | None = None
    ) -> np.ndarray:
        """The query's vector (whitespace-normalised) by `embedder` (the configured one
        unless given), from this user's recent queries when it is one of them."""
        embedder = embedder or self.embedder
        text = " ".join(query.split())
        key = (author_id, f"{embedder.model}@{embedder.dimensions}\x00{text}")
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        batch = await embedder.embed([text], truncate=True)
        vector = np.asarray(batch.vectors[0], dtype=np.float32)
        self._cache.put(key, vector)
        return vector

    def _query_embedder(self, reading: Serving | None) -> Any | None:
        """The embedder whose vectors the index `reading` holds (None: none can be built,
        e.g. the previous model was OpenAI's and its key is gone)."""
        if reading is None or reading.model_key == embedding_model_key(self.embedder):
            return self.embedder
        if self.query_embedders is None:
            return None
        return self.query_embedders(reading.model_key)

    async def search(
        self,
        author_id: ObjectId,
        query: str,
        *,
        limit: int = 5,
        chunks_per_note: int = 3,
        mode: Mode = "hybrid",
        filters: SearchFilters | None = None,
    ) -> SearchOutcome:
        """The author's best `limit` notes for `query`; see the module docstring. Hybrid
        search whose embedding fails answers with its keyword ranking and a warning."""
        started = time.perf_counter()
        filters = filters or SearchFilters()
        if not self.chunking_enabled:
            return await self._note_level(author_id, query, limit, filters, started)
        # One index for the whole search: a user whose new index is still being built reads
        # the previous generation's, with queries embedded by its model.
        reading = self.backend.reading(author_id) if hasattr(self.backend, "reading") else None
        embedder = self._query_embedder(reading)
        warning = None
        if embedder is None and mode != "keyword":
            mode, warning = "keyword", PREVIOUS_MODEL_WARNING
        # The backend starts keyword ranking while the query is being embedded.
        embedding = PendingEmbedding.start(
            lambda: self.embed_query(author_id, query, embedder), mode
        )
        k = max(self.ranking.candidates, limit * chunks_per_note * 4)
        results: list[NoteResult] = []
        kept: list[ChunkHit] = []
        while True:
            lists = await self._retrieve(author_id, query, embedding, mode, k, filters, reading)
            if mode == "hybrid" and (failure := embedding.failure()) is not None:
                log.warning("search.degraded_to_keyword", error=str(failure)[:300])
                mode, warning = "keyword", KEYWORD_ONLY_WARNING
                lists.pop("vector", None)
            hits = self._fuse(lists)
            found = await self._group(author_id, hits, limit, chunks_per_note, filters)
            # The round with the most notes is kept; of equals, the first (deeper lists
            # only add weaker chunks of the same notes).
            if len(found) > len(results) or not results:
                results, kept = found, hits
            deeper = await self._deeper_k(author_id, filters, lists, k, len(results), limit)
            if deeper is None:
                break
            k = deeper
            log.info("search.deepened", k=k, notes=len(results), limit=limit)
        # Atlas reports a vector score of (1 + cosine) / 2.
        ev = query_evidence(query, kept, cosine_from_score=self.backend.name != "atlas")
        # Cosines belong to the model that embedded the query (an older generation's too).
        relevance_model = model_for(getattr(embedder, "model", None))
        results = with_relevance(results, ev, usable_model(relevance_model, ev))
        outcome = self._outcome(started, results, mode, hits=len(hits), warning=warning)
        return replace(outcome, evidence=ev)

    async def _retrieve(
        self,
        author_id: ObjectId,
        query: str,
        embedding: PendingEmbedding,
        mode: Mode,
        k: int,
        filters: SearchFilters,
        reading: Serving | None = None,
    ) -> RetrieverLists:
        """The backend's per-retriever lists; an embedding error in mode "vector" (nothing
        to fall back to) becomes `EmbeddingUnavailable`."""
        extra = {} if reading is None else {"reading": reading}
        try:
            return await self.backend.retrieve(
                author_id,
                query=query,
                vector=embedding.vector,
                mode=mode,
                k=k,
                filters=filters,
                **extra,
            )
        except EmbeddingError as exc:
            raise EmbeddingUnavailable(
                f"the embedding provider is unavailable ({exc}); retry, or search with mode=keyword"
            ) from exc
        finally:
            embedding.cancel()

    def _fuse(self, lists: RetrieverLists) -> list[ChunkHit]:
        """The retrievers' lists fused into one ranking (RRF), one version per note."""
        cfg = self.ranking
        weights = {"vector": cfg.vector_weight, "keyword": cfg.keyword_weight}
        fused = fuse_chunk_lists(
            lists, k=cfg.rrf_k, weights={n: weights[n] for n in lists if n in weights}
        )
        return newest_version_per_note(fused)

    async def _deeper_k(
        self,
        author_id: ObjectId,
        filters: SearchFilters,
        lists: RetrieverLists,
        k: int,
        found: int,
        limit: int,
    ) -> int | None:
        """The next round's `k`, or None when the notes found are final.

        A note with many matching chunks can fill a retriever's whole top k, so fewer than
        `limit` notes come back though more match. Search goes deeper while a list came
        back full (a round that adds no note does not end it: a note of hundreds of chunks
        fills the next round too) and the author has more notes passing the filters than
        were found (so a user with fewer notes than `limit` pays one round)."""
        full = any(len(hits) >= k for hits in lists.values())
        deeper = min(k * DEEPEN_FACTOR, MAX_CANDIDATES)
        if found >= limit or not full or deeper < 2 * k:
            return None
        more = _notes_filter(author_id, filters)
        if await self.notes.count_active(more, limit=found + 1) <= found:
            return None
        return deeper

    def _outcome(
        self,
        started: float,
        results: list[NoteResult],
        mode: Mode,
        *,
        hits: int,
        warning: str | None,
    ) -> SearchOutcome:
        """The search's outcome, its duration recorded and logged."""
        took = (time.perf_counter() - started) * 1000
        obs.chunk_search_duration.record(took, {"mode": mode, "backend": self.backend.name})
        log.info(
            "search.done",
            mode=mode,
            backend=self.backend.name,
            hits=hits,
            notes=len(results),
            took_ms=round(took, 2),
        )
        return SearchOutcome(
            results=results,
            took_ms=round(took, 2),
            mode=mode,
            backend=self.backend.name,
            warning=warning,
        )

    async def _note_level(
        self, author_id: ObjectId, query: str, limit: int, filters: SearchFilters, started: float
    ) -> SearchOutcome:
        """CHUNKING_ENABLED=false: whole notes, ranked by term frequency (the rollback)."""
        mongo = _notes_filter(author_id, filters)
        docs = await self.notes.recent_for_author(author_id, limit=NOTE_LEVEL_SCAN, query=mongo)
        results = note_level_results(docs, query, limit)
        took = round((time.perf_counter() - started) * 1000, 2)
        return SearchOutcome(
            results=results,
            took_ms=took,
            mode="note_level",
            backend="note_level",
            # Said whatever mode was asked for; chat passes it on.
            warning=NOTE_LEVEL_WARNING,
        )

    async def _group(
        self,
        author_id: ObjectId,
        hits: list[ChunkHit],
        limit: int,
        chunks_per_note: int,
        filters: SearchFilters,
    ) -> list[NoteResult]:
        """The best `limit` notes of `hits` that pass the re-check, with merged sections."""
        if not hits:
            return []
        ranked = rank_note_ids(hits, author_id=str(author_id), score=self.ranking.note_scorer)
        metas = await current_notes(self.notes, author_id, ranked, limit, filters)
        contents = await section_texts(self.notes, author_id, hits, metas)
        return group_by_note(
            hits,
            metas,
            limit=limit,
            chunks_per_note=chunks_per_note,
            score=self.ranking.note_scorer,
            section_score=self.ranking.section_scorer,
            note_contents=contents,
            max_section_chars=DEFAULT_MAX_SECTION_CHARS,
        )


def _notes_filter(author_id: ObjectId, filters: SearchFilters) -> dict[str, Any]:
    """The author's active notes passing the user filters, as a `notes` query (the one the
    Atlas backend runs for `updated_after`)."""
    note_ids = None if filters.note_ids is None else [ObjectId(n) for n in filters.note_ids]
    return notes_filter_query(
        author_id, updated_after=filters.updated_after, tags=filters.tags, note_ids=note_ids
    )
