"""What `benchmarks/retrieval_levers.py` measures on one indexed corpus: every question's
search response with each section's evidence, under each search-side lever.

A *search lever* changes the search itself (the BM25 column weights, the query text) and is
run as its own search. An *order lever* only reorders the sections of the same response
(section scores from relevance or from their note's score), so it is computed from the
shipped run's records (`reorder`), exactly as production would order them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bson import ObjectId

from api.evaluation.dataset import Dataset, Question
from api.evaluation.harness import EvalCorpus, SearchConfig
from api.evaluation.metrics import Citation, QuestionOutcome, RankedNote, judge
from api.retrieval.backends import LocalBackend
from api.retrieval.relevance import RelevanceModel, section_features
from api.retrieval.service import RetrievalService

# Question phrasing that says nothing about the topic ("How do I …", "Is there a way to …").
_PHRASING = re.compile(
    r"^\s*(?:(?:how|what|where|when|which|why|who)\b(?:\s+(?:do|does|did|can|could|should|"
    r"would|is|are|was|were|to))?(?:\s+(?:i|we|you|one|it))?|(?:can|could|should|do|does|is|"
    r"are)\s+(?:i|we|you|one|it|there)\b(?:\s+a\s+way\s+to)?)\s+",
    re.IGNORECASE,
)
# Words of requests that BM25 would match anywhere ("use", "get", "way") and stop words miss.
FILLER = frozenset(
    "use using used get getting make way want need possible able instead also something "
    "thing things like set".split()
)


def without_phrasing(query: str) -> str:
    """The query without its leading question phrasing (never empty)."""
    rest = _PHRASING.sub("", query, count=1)
    return rest if rest.strip() else query


def without_filler(query: str) -> str:
    """The query without filler words (never empty)."""
    words = [w for w in query.split() if w.strip("?,.!").casefold() not in FILLER]
    return " ".join(words) or query


@dataclass(frozen=True, slots=True)
class SectionRecord:
    note_id: str  # dataset id
    start: int
    end: int
    score: float  # fused section score (shipped order)
    note_score: float
    features: dict[str, float]
    hit: bool  # overlaps a gold span of its question


@dataclass(slots=True)
class QuestionRecord:
    question_id: str
    outcome: QuestionOutcome
    sections: list[SectionRecord] = field(default_factory=list)
    took_ms: float = 0.0


class _QueryTextService(RetrievalService):
    """The retrieval service with the query text rewritten for the embedding."""

    def __init__(self, base: RetrievalService, rewrite: Callable[[str], str]) -> None:
        super().__init__(
            base.backend,
            base.embedder,
            base.notes,
            ranking=base.ranking,
            chunking_enabled=base.chunking_enabled,
        )
        self._rewrite = rewrite

    async def embed_query(self, author_id: ObjectId, query: str) -> Any:
        return await super().embed_query(author_id, self._rewrite(query))


class _KeywordTextBackend:
    """A backend whose keyword retriever sees a rewritten query."""

    def __init__(self, inner: LocalBackend, rewrite: Callable[[str], str]) -> None:
        self.inner, self.rewrite, self.name = inner, rewrite, inner.name

    async def retrieve(self, author_id: ObjectId, **kw: Any) -> Any:
        kw["query"] = self.rewrite(kw["query"])
        return await self.inner.retrieve(author_id, **kw)


@dataclass(frozen=True, slots=True)
class SearchLever:
    """One search-side configuration: a `SearchConfig` and query rewrites."""

    name: str
    family: str
    search: SearchConfig = field(default_factory=SearchConfig)
    vector_text: Callable[[str], str] | None = None
    keyword_text: Callable[[str], str] | None = None


SHIPPED = SearchLever("shipped", "shipped")
SEARCH_LEVERS: tuple[SearchLever, ...] = (
    SearchLever("BM25 breadcrumb ×2", "BM25 columns", SearchConfig(heading_weight=2.0)),
    SearchLever("BM25 breadcrumb ×4", "BM25 columns", SearchConfig(heading_weight=4.0)),
    SearchLever(
        "question phrasing dropped for the embedding", "query", vector_text=without_phrasing
    ),
    SearchLever("filler words dropped for BM25", "query", keyword_text=without_filler),
    SearchLever(
        "RRF k = 60 (the naive pipeline's)",
        "fusion",
        SearchConfig(ranking=SearchConfig().ranking.__class__(rrf_k=60.0)),
    ),
)


async def lever_service(corpus: EvalCorpus, lever: SearchLever) -> RetrievalService:
    """The retrieval service for a lever (the shipped one for the shipped lever)."""
    service = await corpus.service(lever.search)
    if lever.keyword_text is not None:
        service.backend = _KeywordTextBackend(service.backend, lever.keyword_text)  # type: ignore[assignment]
    if lever.vector_text is not None:
        service = _QueryTextService(service, lever.vector_text)
    return service


def _record(
    q: Question, results: Sequence[Any], evidence: Any, corpus: EvalCorpus
) -> QuestionRecord:
    sections = []
    for note in results:
        note_id = corpus.id_map.get(note.note_id, note.note_id)
        for s in note.matching_chunks:
            feats = section_features(s, note.title, evidence) if evidence else {}
            hit = any(g.overlaps(note_id, s.start_offset, s.end_offset) for g in q.gold)
            sections.append(
                SectionRecord(
                    note_id, s.start_offset, s.end_offset, s.score, note.score, feats, hit
                )
            )
    return QuestionRecord(q.id, judge(q, corpus.ranked(results), corpus.dataset.notes), sections)


async def collect(
    corpus: EvalCorpus, questions: Sequence[Question], lever: SearchLever
) -> list[QuestionRecord]:
    """Every question asked through the lever's service, with section evidence."""
    service = await lever_service(corpus, lever)
    cfg = lever.search
    out = []
    for q in questions:
        started = time.perf_counter()
        res = await service.search(
            corpus.author_id, q.question, limit=cfg.limit, chunks_per_note=cfg.chunks_per_note
        )
        rec = _record(q, res.results, res.evidence, corpus)
        rec.took_ms = (time.perf_counter() - started) * 1000
        out.append(rec)
    return out


@dataclass
class SetResult:
    """One evaluation set: its splits, index and every run's per-question records."""

    name: str
    dataset: Dataset
    splits: dict[str, set[str]]
    corpus: str
    runs: dict[str, list[QuestionRecord]] = field(default_factory=dict)
    foreign: dict[str, list[QuestionRecord]] = field(default_factory=dict)
    latency: dict[str, float] = field(default_factory=dict)  # lever → median time ratio
    search_ms: float = 0.0  # median shipped search, same timing rounds
    model_cost: Any = None  # the embedding-model lever's `ModelCost` (docs set only)
    measured: dict[str, str] = field(default_factory=dict)  # what → when and which code


Key = Callable[[SectionRecord], float]


def reorder(records: Sequence[QuestionRecord], dataset: Dataset, key: Key) -> list[QuestionRecord]:
    """The same responses with every section scored by `key` (citation order follows it)."""
    questions = {q.id: q for q in dataset.questions}
    out = []
    for rec in records:
        notes: dict[str, list[Citation]] = {}
        for s in rec.sections:
            notes.setdefault(s.note_id, []).append(Citation(s.note_id, s.start, s.end, key(s)))
        ranked = [RankedNote(n, tuple(cs)) for n, cs in notes.items()]
        outcome = judge(questions[rec.question_id], ranked, dataset.notes)
        out.append(QuestionRecord(rec.question_id, outcome, rec.sections, rec.took_ms))
    return out


def by_relevance(model: RelevanceModel) -> Key:
    """Sections ordered by their estimated relevance (fused score breaks ties)."""
    return lambda s: model.probability(s.features) + 1e-9 * s.score


def with_note_context(weight: float) -> Key:
    """A section's fused score plus `weight` × its note's score."""
    return lambda s: s.score + weight * s.note_score
