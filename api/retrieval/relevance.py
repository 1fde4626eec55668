"""Calibrated relevance: the estimated probability that a returned section answers the
query, from the evidence search already has (pure).

Fusion scores are ranks: they order one response and say nothing across queries. The
relevance of a section is a logistic model over its best chunk's evidence
(`section_features`), fitted on the dev splits of the evaluation sets and checked on their
test splits: of sections given about 0.4, 4 to 5 in 10 answered their question
(docs/search.md#relevance). Cosines belong to an embedding model, so the fitted models
are keyed by it (`MODELS`); any other model (OpenAI's) gets `KEYWORD_MODEL`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from api.retrieval.local.fulltext import query_terms
from api.retrieval.types import ChunkHit, NoteResult, SectionMatch

FEATURES = ("cosine", "cosine_gap", "bm25", "bm25_share", "coverage", "rank_prior")
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class RelevanceModel:
    """A logistic model: `sigmoid(intercept + Σ weight × feature)`."""

    name: str
    intercept: float
    weights: Mapping[str, float]

    def probability(self, features: Mapping[str, float]) -> float:
        """The estimated probability for one section's features (missing ones count 0)."""
        z = self.intercept + sum(w * features.get(f, 0.0) for f, w in self.weights.items())
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


# Fitted by `python -m benchmarks.retrieval_levers` on the dev splits (its report shows the
# fit and the calibration on test); refit when features or ranking change.
MODELS: dict[str, RelevanceModel] = {
    "all-MiniLM-L6-v2-onnx-int8": RelevanceModel(
        name="local-minilm",
        intercept=-8.471,
        weights={
            "cosine": 2.615,
            "cosine_gap": -3.784,
            "bm25": 0.060,
            "bm25_share": 2.369,
            "coverage": 1.972,
            "rank_prior": 3.688,
        },
    ),
}
KEYWORD_MODEL = RelevanceModel(
    name="keyword",
    intercept=-8.975,
    weights={"bm25": 0.618, "bm25_share": 1.198, "coverage": 2.834, "rank_prior": 4.391},
)


def model_for(embedding_model: str | None) -> RelevanceModel:
    """The model fitted for this embedding model's cosines, else the keyword model."""
    return MODELS.get(embedding_model or "", KEYWORD_MODEL)


def usable_model(model: RelevanceModel, ev: QueryEvidence) -> RelevanceModel:
    """`model`, or the keyword model when the query has no vector evidence (keyword mode,
    or hybrid search whose embedding failed)."""
    return model if "vector" in ev.best or "cosine" not in model.weights else KEYWORD_MODEL


@dataclass(frozen=True, slots=True)
class QueryEvidence:
    """What one query's candidate lists say about it as a whole: its terms, and per
    retriever the best and the worst raw score among the candidates (a chunk missing from
    the vector list has a cosine at most the worst one in it)."""

    terms: tuple[str, ...]
    best: Mapping[str, float]
    worst: Mapping[str, float]
    cosine_from_score: bool = True  # False: vector scores are Atlas's (1 + cosine) / 2


def query_evidence(
    query: str, hits: Iterable[ChunkHit], *, cosine_from_score: bool = True
) -> QueryEvidence:
    """The evidence of `query` over its fused candidates `hits`."""
    best: dict[str, float] = {}
    worst: dict[str, float] = {}
    for hit in hits:
        for name, value in hit.retriever_scores.items():
            best[name] = max(best.get(name, value), value)
            worst[name] = min(worst.get(name, value), value)
    return QueryEvidence(tuple(query_terms(query)), best, worst, cosine_from_score)


def _cosine(ev: QueryEvidence, score: float) -> float:
    return score if ev.cosine_from_score else 2.0 * score - 1.0


def _normal(word: str) -> str:
    word = word.casefold()
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def coverage(terms: Sequence[str], text: str) -> float:
    """The share of `terms` (query terms, see `query_terms`) that `text` holds: words
    compared case-folded with a plural `s` dropped; a CJK character pair ("東 京") as a
    substring."""
    if not terms:
        return 0.0
    words = {_normal(w) for w in _WORD.findall(text)}
    folded = text.casefold()
    found = 0
    for term in terms:
        if " " in term:
            found += term.replace(" ", "") in folded
        else:
            found += _normal(term) in words
    return found / len(terms)


def section_features(section: SectionMatch, title: str, ev: QueryEvidence) -> dict[str, float]:
    """The evidence of one section for its query (names in `FEATURES`)."""
    features: dict[str, float] = {}
    if "vector" in ev.best:
        top = _cosine(ev, ev.best["vector"])
        own = section.retriever_scores.get("vector", ev.worst["vector"])
        features["cosine"] = _cosine(ev, own)
        features["cosine_gap"] = top - features["cosine"]
    keyword_best = ev.best.get("keyword", 0.0)
    if keyword_best > 0:
        bm25 = max(section.retriever_scores.get("keyword", 0.0), 0.0)
        features["bm25"] = math.log1p(bm25)
        features["bm25_share"] = bm25 / keyword_best
    crumb = " ".join([title, *section.heading_path])
    features["coverage"] = coverage(ev.terms, f"{crumb}\n{section.content_md}")
    features["rank_prior"] = 1.0 / min(section.ranks.values(), default=math.inf)
    return features


def with_relevance(
    results: Sequence[NoteResult], ev: QueryEvidence, model: RelevanceModel
) -> list[NoteResult]:
    """`results` with every section's `relevance` (and each note's best) filled in."""
    out: list[NoteResult] = []
    for note in results:
        sections = [
            replace(s, relevance=model.probability(section_features(s, note.title, ev)))
            for s in note.matching_chunks
        ]
        best = max((s.relevance or 0.0 for s in sections), default=None)
        out.append(replace(note, matching_chunks=sections, relevance=best))
    return out
