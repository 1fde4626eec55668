"""Search: embed the query once → the backend's per-retriever chunk lists (user pre-filter)
→ reciprocal rank fusion → candidates checked against `notes` (the author's, active, the
chunk's version is the indexed one) → grouped into notes with merged matching sections."""

from __future__ import annotations

import asyncio
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import structlog
from bson import ObjectId

from api import observability as obs
from api.errors import ServiceUnavailable
from api.notes.repository import NotesSearchQueries
from api.notes.stored import note_content, note_tags, note_title, note_updated_at
from api.notes.versioning import whole_version
from api.retrieval.atlas_pipelines import notes_filter_query
from api.retrieval.backends import Mode, QueryVector, SearchBackend
from api.retrieval.fusion import fuse_chunk_lists
from api.retrieval.grouping import (
    DEFAULT_MAX_SECTION_CHARS,
    group_by_note,
    newest_version_per_note,
    rank_note_ids,
)
from api.retrieval.local.sync import note_meta
from api.retrieval.note_text import TextWindows, section_windows
from api.retrieval.types import NoteMeta, NoteResult, SearchFilters, SectionMatch
from connectors.embeddings.base import EmbeddingError

log = structlog.get_logger(__name__)


class EmbeddingUnavailable(ServiceUnavailable):
    code = "embedding_unavailable"


async def _vector_or_none(embedding: asyncio.Future[np.ndarray]) -> np.ndarray | None:
    """The query vector, or None when the embedding provider failed."""
    try:
        return await embedding
    except EmbeddingError:
        return None


def _embedding_failure(embedding: asyncio.Future[np.ndarray] | None) -> EmbeddingError | None:
    """The provider error the query embedding ended with, if it did."""
    if embedding is None or not embedding.done() or embedding.cancelled():
        return None
    exc = embedding.exception()
    return exc if isinstance(exc, EmbeddingError) else None


# Deeper rounds when a crowded candidate list returned too few notes (`search`).
DEEPEN_FACTOR = 4
MAX_CANDIDATES = 4000


@dataclass(frozen=True, slots=True)
class RankingConfig:
    """Ranking knobs (defaults chosen on the dev split; see BENCHMARKS.md `retrieval`).

    `rrf_k=1` rather than the RRF paper's 60: with a few dozen candidates per retriever,
    k=60 makes rank 1 (1/61) and rank 10 (1/70) nearly equal, so chunks that are mediocre in
    both lists beat the best chunk of either; k=1 lets each retriever's top hits lead.
    Measured with `benchmarks/retrieval.py` (tuned on dev, checked on test: MRR@3 +4 points,
    notes ranked first correctly 89 % vs 63 % of the time; Recall@3 unchanged)."""

    rrf_k: float = 1.0
    vector_weight: float = 1.0
    keyword_weight: float = 1.0
    candidates: int = 60  # chunks fetched per retriever (at least)
    note_scorer: str = "weighted_max_sum"
    # A merged section's score, from its chunks': their best. The note scorer's sum made a
    # span of 8 weak table chunks outrank the one holding the exact row asked for (found by
    # review); on the retrieval dataset the two score alike (`retrieval_section_scorer`).
    section_scorer: str = "max"


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    results: list[NoteResult]
    took_ms: float
    mode: Mode | Literal["note_level"]
    backend: str
    warning: str | None = None


def _text_of(doc: dict[str, Any], chunk_version: int | None) -> bool:
    """Whether the note's current text is the one chunks of `chunk_version` were cut from:
    it has not changed since (a note from before `content_version` counts as changed at
    its current version)."""
    if chunk_version is None:
        return False
    version = whole_version(doc.get("version"))
    changed_at = doc.get("content_version")
    if not isinstance(changed_at, int) or isinstance(changed_at, bool):
        changed_at = version
    if not 1 <= changed_at <= version:
        changed_at = version
    return changed_at <= chunk_version <= version


class QueryEmbeddingCache:
    """A small LRU of query vectors: repeated queries (chat follow-ups, pagination, UIs
    searching as you type) skip the model. Keyed by (user, query): a hit is measurably
    faster (`took_ms`, response time), so one cache for all users would tell anyone which
    exact questions others had just asked."""

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
    ) -> None:
        self.backend = backend
        self.embedder = embedder
        self.notes = notes
        self.ranking = ranking or RankingConfig()
        self.chunking_enabled = chunking_enabled
        self._cache = QueryEmbeddingCache()

    async def embed_query(self, author_id: ObjectId, query: str) -> np.ndarray:
        """The query's vector (whitespace-normalised), from this user's recent queries
        when it is one of them."""
        text = " ".join(query.split())
        key = (author_id, text)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        batch = await self.embedder.embed([text], truncate=True)
        vector = np.asarray(batch.vectors[0], dtype=np.float32)
        self._cache.put(key, vector)
        return vector

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
        started = time.perf_counter()
        filters = filters or SearchFilters()
        if not self.chunking_enabled:
            return await self._note_level(author_id, query, limit, filters, started)
        cfg = self.ranking
        warning = None
        k = max(cfg.candidates, limit * chunks_per_note * 4)
        # The backend starts keyword ranking while the query is being embedded.
        embedding = (
            asyncio.ensure_future(self.embed_query(author_id, query)) if mode != "keyword" else None
        )
        vector: QueryVector = embedding
        if mode == "hybrid" and embedding is not None:
            # Hybrid degrades to its keyword half rather than failing: an embedding error
            # reaches the backend as "no vector", so the keyword list it ranked meanwhile is
            # kept, not ranked a second time.
            vector = asyncio.ensure_future(_vector_or_none(embedding))
        results: list[NoteResult] = []
        while True:
            try:
                lists = await self.backend.retrieve(
                    author_id, query=query, vector=vector, mode=mode, k=k, filters=filters
                )
            except EmbeddingError as exc:  # mode "vector": nothing to fall back to
                raise EmbeddingUnavailable(
                    f"the embedding provider is unavailable ({exc}); retry, or search with "
                    "mode=keyword"
                ) from exc
            finally:
                for pending in (vector, embedding):
                    if isinstance(pending, asyncio.Future) and not pending.done():
                        pending.cancel()
            failure = _embedding_failure(embedding)
            if mode == "hybrid" and failure is not None:
                log.warning("search.degraded_to_keyword", error=str(failure)[:300])
                mode, warning = "keyword", "embedding provider unavailable: keyword results only"
                lists.pop("vector", None)
            weights = {"vector": cfg.vector_weight, "keyword": cfg.keyword_weight}
            hits = newest_version_per_note(
                fuse_chunk_lists(
                    lists, k=cfg.rrf_k, weights={n: weights[n] for n in lists if n in weights}
                )
            )
            found = await self._group(author_id, hits, limit, chunks_per_note, filters)
            # A note with many matching chunks can fill a retriever's whole top k, so
            # fewer than `limit` notes came back though more match (a 492-chunk spec left
            # room for 2 notes of 10; found by review): fetch deeper while a list came back
            # full (a note of 300 chunks fills the second round too, so a round that adds
            # no note does not end it) and the author has more notes passing the filters
            # than were found (else every search of a user with fewer notes than `limit`
            # paid every round). The round with the most notes is kept; of equals, the
            # first (deeper lists only add weaker chunks of the same notes).
            if len(found) > len(results) or not results:
                results = found
            full = any(len(hits_) >= k for hits_ in lists.values())
            deeper = min(k * DEEPEN_FACTOR, MAX_CANDIDATES)
            if len(results) >= limit or not full or deeper < 2 * k:
                break
            more = _notes_filter(author_id, filters)
            if await self.notes.count_active(more, limit=len(results) + 1) <= len(results):
                break
            k = deeper
            log.info("search.deepened", k=k, notes=len(results), limit=limit)
        took = (time.perf_counter() - started) * 1000
        obs.chunk_search_duration.record(took, {"mode": mode, "backend": self.backend.name})
        log.info(
            "search.done",
            mode=mode,
            backend=self.backend.name,
            hits=len(hits),
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
            # A client asking for `vector` got keyword-ranked whole notes without a word
            # (found by review); chat passes this on too.
            warning=NOTE_LEVEL_WARNING,
        )

    async def _group(
        self,
        author_id: ObjectId,
        hits: list[Any],
        limit: int,
        chunks_per_note: int,
        filters: SearchFilters,
    ) -> list[NoteResult]:
        if not hits:
            return []
        # Every returned note is re-checked in `notes`: the author's own and still active.
        # Candidates are checked best first, a window at a time, until `limit` pass: the
        # notes ranked below them could not be returned anyway (a 100k-chunk index yields
        # ~100 candidate notes; one `$in` over all of them cost more than the search).
        ranked = rank_note_ids(hits, author_id=str(author_id), score=self.ranking.note_scorer)
        # A legacy note whose `_id` is not an ObjectId is never returned (the API cannot
        # address it); its chunks, indexed before the queue refused such notes, made every
        # search that ranked them a 500 (InvalidId; found by review).
        ranked = [n for n in ranked if ObjectId.is_valid(n)]
        docs: list[dict[str, Any]] = []
        window = limit + max(limit, RECHECK_SLACK)
        for start in range(0, len(ranked), window):
            batch = [ObjectId(n) for n in ranked[start : start + window]]
            found = await self.notes.active_metas(author_id, batch)
            # The index filtered on tags and `updated_at` as of each note's last index run;
            # a note edited since (tags changed, not re-indexed yet) must not pass a filter
            # it no longer matches. (One that newly matches waits for its re-index.)
            docs += [d for d in found if filters.is_empty or filters.matches(note_meta(d))]
            if len(docs) >= limit:
                break
        # Not `indexed_version`: each backend already returns one whole version per note
        # (the local index swaps atomically; Atlas pipelines guard with a $lookup). Between
        # a commit and the local index's refresh the index may serve the previous version
        # for a few ms — consistent, never mixed, never empty.
        metas: dict[str, NoteMeta] = {
            str(d["_id"]): replace(note_meta(d), indexed_version=None) for d in docs
        }
        # Two hits in one section merge into one citation cut from the note's text: read
        # only the windows such cuts can reach, not whole (up to 2 MB) notes.
        spans = section_windows(
            [h for h in hits if h.note_id in metas], max_section_chars=DEFAULT_MAX_SECTION_CHARS
        )
        contents: dict[str, TextWindows] = {}
        if spans:
            found = await self.notes.text_windows(
                author_id, {ObjectId(n): windows for n, windows in spans.items()}
            )
            # Only text the chunks were cut from: after a content edit that is not indexed
            # yet, the chunks' offsets index the OLD text, and cutting the new one there
            # gave the model (and the snippet) unrelated text. Those sections are rebuilt
            # from the chunks' own text instead. A title or tag edit moves `version` but
            # not `content_version` (the version of the last text change), so the text
            # stays usable (and sibling sections stay apart, see grouping._joins).
            versions = {h.note_id: h.note_version for h in hits}
            for doc in found:
                note_id, texts = str(doc["_id"]), doc.get("windows")
                if isinstance(texts, list) and _text_of(doc, versions.get(note_id)):
                    starts = [start for start, _end in spans[note_id]]
                    contents[note_id] = TextWindows(tuple(zip(starts, texts, strict=True)))
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


_WORD = re.compile(r"\w+", re.UNICODE)
NOTE_LEVEL_WARNING = (
    "chunking is disabled (CHUNKING_ENABLED=false): whole notes ranked by word matches only"
)
NOTE_LEVEL_SCAN = 2000  # newest notes scanned by the note-level fallback
RECHECK_SLACK = 4  # a window re-checks limit + max(limit, this) candidate notes


def note_level_results(docs: list[dict[str, Any]], query: str, limit: int) -> list[NoteResult]:
    """The CHUNKING_ENABLED=false fallback (the roadmap's rollback): rank whole notes by
    query-term frequency (title counts triple), each returned as one whole-note section."""
    terms = {t.lower() for t in _WORD.findall(query) if len(t) > 1}
    scored: list[tuple[float, dict[str, Any]]] = []
    for doc in docs:
        content = note_content(doc)
        words = [w.lower() for w in _WORD.findall(content)]
        title_words = [w.lower() for w in _WORD.findall(note_title(doc))]
        tf = sum(1 for w in words if w in terms) + 3 * sum(1 for w in title_words if w in terms)
        if tf:
            scored.append((tf / (1 + len(words)) ** 0.5, doc))
    scored.sort(key=lambda item: (-item[0], str(item[1]["_id"])))
    results = []
    for score, doc in scored[:limit]:
        content = note_content(doc)
        title = note_title(doc)
        results.append(
            NoteResult(
                note_id=str(doc["_id"]),
                title=title,
                tags=note_tags(doc),
                updated_at=note_updated_at(doc),
                score=round(score, 6),
                matching_chunks=[
                    SectionMatch(
                        chunk_ids=[],
                        chunk_indexes=[],
                        heading_path=[title],
                        section_path=title,
                        content_md=content,
                        start_offset=0,
                        end_offset=len(content),
                        score=score,
                        note_version=whole_version(doc.get("version")),
                    )
                ],
            )
        )
    return results
