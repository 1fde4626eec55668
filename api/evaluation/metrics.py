"""Section-level retrieval metrics (pure: no I/O).

A citation (one `SectionMatch`: note, character span) hits when it overlaps a gold section.
Recall@k and MRR@k over distinct citations in citation or search order, strict recall (the
citation mostly inside the gold section) and note-level recall (`aggregate`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from api.evaluation.dataset import Gold, Note, Question

CitationOrder = Literal["citation", "search"]
CUTOFFS: tuple[int, ...] = (1, 3, 5, 10)
STRICT_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class Citation:
    """One retrieved section: a span of a note (dataset note id), with its section score."""

    note_id: str
    start: int
    end: int
    score: float = 0.0

    @property
    def length(self) -> int:
        return max(0, self.end - self.start)


@dataclass(frozen=True, slots=True)
class RankedNote:
    """One note of a search response: its sections best first."""

    note_id: str
    sections: tuple[Citation, ...]


def order_citations(notes: Sequence[RankedNote], order: CitationOrder) -> list[Citation]:
    """Flatten a response into citations in `order`: "citation" sorts every section by its
    own score, best first (how chat numbers its references); "search" keeps the notes'
    rank order and each note's own section order (what `POST /v1/search` shows)."""
    flat = [c for note in notes for c in note.sections]
    if order == "search":
        return flat
    # `sorted` is stable: equal scores keep search order, as build_context's sort does.
    return sorted(flat, key=lambda c: -c.score)


def distinct_citations(citations: Iterable[Citation], notes: Mapping[str, Note]) -> list[Citation]:
    """Drop citations that add no new leaf section (exact repeats included)."""
    cited: set[tuple[str, tuple[int, int]]] = set()
    spans: set[tuple[str, int, int]] = set()
    out: list[Citation] = []
    for c in citations:
        key = (c.note_id, c.start, c.end)
        if key in spans:
            continue
        note = notes.get(c.note_id)
        leaves = note.sections_in(c.start, c.end) if note is not None else []
        ids = {(c.note_id, s.span) for s in leaves}
        if ids and ids <= cited:
            continue
        spans.add(key)
        cited |= ids
        out.append(c)
    return out


def gold_share(golds: Sequence[Gold], c: Citation) -> float:
    """The share of the citation's characters that lie in one gold section (the largest
    such share); 0 when it hits none."""
    if c.length == 0:
        return 0.0
    best = 0
    for g in golds:
        if g.note_id == c.note_id:
            best = max(best, min(c.end, g.span[1]) - max(c.start, g.span[0]))
    return best / c.length


def first_hit_rank(
    golds: Sequence[Gold], citations: Sequence[Citation], *, min_share: float = 0.0
) -> int | None:
    """1-based rank of the first citation overlapping any gold section, or None. With
    `min_share`, a hit also needs that share of its characters inside the gold section."""
    for rank, c in enumerate(citations, start=1):
        if any(g.overlaps(c.note_id, c.start, c.end) for g in golds) and (
            min_share <= 0.0 or gold_share(golds, c) >= min_share
        ):
            return rank
    return None


def first_note_rank(golds: Sequence[Gold], note_ids: Sequence[str]) -> int | None:
    """1-based rank of the first gold note among distinct `note_ids`, or None."""
    wanted = {g.note_id for g in golds}
    for rank, note_id in enumerate(dict.fromkeys(note_ids), start=1):
        if note_id in wanted:
            return rank
    return None


@dataclass(frozen=True, slots=True)
class QuestionOutcome:
    """What one question got: first-hit ranks and the citations it was judged on."""

    question_id: str
    qtype: str | None
    rank: int | None  # first hit among distinct citations, citation (chat) order
    search_rank: int | None  # first hit in search order
    strict_rank: int | None  # first strict hit (citation order), see `STRICT_SHARE`
    note_rank: int | None  # first gold note among distinct notes
    top3_chars: int  # total length of the first 3 distinct citations (citation order)
    citations: tuple[Citation, ...] = field(repr=False)  # citation order, distinct


def judge(
    question: Question, notes: Sequence[RankedNote], corpus: Mapping[str, Note]
) -> QuestionOutcome:
    """Score one search response for `question` (both orders, and note level)."""
    cited = distinct_citations(order_citations(notes, "citation"), corpus)
    listed = distinct_citations(order_citations(notes, "search"), corpus)
    return QuestionOutcome(
        question_id=question.id,
        qtype=question.type,
        rank=first_hit_rank(question.gold, cited),
        search_rank=first_hit_rank(question.gold, listed),
        strict_rank=first_hit_rank(question.gold, cited, min_share=STRICT_SHARE),
        note_rank=first_note_rank(question.gold, [n.note_id for n in notes]),
        top3_chars=sum(c.length for c in cited[:3]),
        citations=tuple(cited),
    )


def recall_at(ranks: Sequence[int | None], k: int) -> float:
    """Share of ranks that are ≤ k (None: never hit). 0 for no questions."""
    if not ranks:
        return 0.0
    return sum(1 for r in ranks if r is not None and r <= k) / len(ranks)


def mrr_at(ranks: Sequence[int | None], k: int) -> float:
    """Mean reciprocal rank, counting only ranks ≤ k. 0 for no questions."""
    if not ranks:
        return 0.0
    return sum(1.0 / r for r in ranks if r is not None and r <= k) / len(ranks)


def reciprocal(rank: int | None, k: int) -> float:
    """1/rank when rank ≤ k, else 0 (one question's MRR@k term)."""
    return 1.0 / rank if rank is not None and rank <= k else 0.0


def bootstrap_ci(
    values: Sequence[float], *, resamples: int = 2000, seed: int = 0, alpha: float = 0.05
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of per-question `values` (questions
    resampled with replacement; fixed seed, so reruns agree)."""
    if not values or resamples <= 0:
        return (0.0, 0.0)
    data = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return (float(lo), float(hi))


def paired_difference(
    a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of `a - b` over the same questions and its 95 % paired-bootstrap interval: a
    gain whose interval contains 0 is within noise."""
    if len(a) != len(b):
        raise ValueError("paired samples must have the same length")
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    lo, hi = bootstrap_ci(diffs, resamples=resamples, seed=seed)
    return (sum(diffs) / len(diffs) if diffs else 0.0, lo, hi)


@dataclass(frozen=True, slots=True)
class Metrics:
    """Aggregates over a set of questions (fractions in [0, 1])."""

    questions: int
    recall: dict[int, float]  # k → Recall@k, citation order (the primary metric)
    mrr3: float
    mrr10: float
    search_recall: dict[int, float]  # k → Recall@k in search order
    search_mrr3: float
    strict_recall: dict[int, float]  # k → strict Recall@k (citation order)
    strict_mrr3: float
    note_recall: dict[int, float]
    note_mrr3: float
    recall3_ci: tuple[float, float]
    mrr3_ci: tuple[float, float]
    mean_top3_chars: float
    recall3_by_type: dict[str, tuple[int, float]]  # type → (questions, Recall@3)

    @property
    def recall3(self) -> float:
        return self.recall[3]


def aggregate(outcomes: Sequence[QuestionOutcome], *, bootstrap: int = 2000) -> Metrics:
    """Recall@{1,3,5,10}, MRR@3/@10 (both orders), note level, CIs and per-type recall."""
    ranks = [o.rank for o in outcomes]
    listed = [o.search_rank for o in outcomes]
    strict = [o.strict_rank for o in outcomes]
    notes = [o.note_rank for o in outcomes]
    by_type: dict[str, list[int | None]] = {}
    for o in outcomes:
        by_type.setdefault(o.qtype or "untyped", []).append(o.rank)
    hits3 = [1.0 if r is not None and r <= 3 else 0.0 for r in ranks]
    rr3 = [reciprocal(r, 3) for r in ranks]
    return Metrics(
        questions=len(outcomes),
        recall={k: recall_at(ranks, k) for k in CUTOFFS},
        mrr3=mrr_at(ranks, 3),
        mrr10=mrr_at(ranks, 10),
        search_recall={k: recall_at(listed, k) for k in CUTOFFS},
        search_mrr3=mrr_at(listed, 3),
        strict_recall={k: recall_at(strict, k) for k in CUTOFFS},
        strict_mrr3=mrr_at(strict, 3),
        note_recall={k: recall_at(notes, k) for k in CUTOFFS},
        note_mrr3=mrr_at(notes, 3),
        recall3_ci=bootstrap_ci(hits3, resamples=bootstrap),
        mrr3_ci=bootstrap_ci(rr3, resamples=bootstrap),
        mean_top3_chars=(sum(o.top3_chars for o in outcomes) / len(outcomes) if outcomes else 0.0),
        recall3_by_type={t: (len(rs), recall_at(rs, 3)) for t, rs in sorted(by_type.items())},
    )
