"""Tuning the ranking knobs on the DEV split (never on test), in stages.

Each stage varies a few knobs around the best configuration so far and scores every
variant on dev by the objective: the mean of Recall@3 and MRR@3 (citation order). Noise
control: with ~180 questions one question is 0.55 points, so variants within `MIN_GAIN` of
the stage's best are treated as equal, and among equals the one that changes the fewest
knobs of the incumbent wins (the incumbent itself if it is among them). The final choice is
then compared with the starting point on test with a paired bootstrap
(`api.evaluation.metrics.paired_difference`).

Stages: note scorer × RRF k; retriever weights; candidates; BM25 column weights (heading vs
content — a `LocalIndex` parameter, reported as evidence only: tuning changes
`RankingConfig` alone).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import structlog

from api.evaluation.dataset import Question
from api.evaluation.harness import EvalCorpus, SearchConfig
from api.evaluation.metrics import Metrics, QuestionOutcome, paired_difference, reciprocal
from api.retrieval.service import RankingConfig

log = structlog.get_logger(__name__)

# The original design's ranking (0.7·max + 0.3·sum note score) with the RRF paper's k: where tuning
# starts, and the reference the shipped defaults are compared with.
ORIGINAL_RANKING = RankingConfig(
    rrf_k=60.0, vector_weight=1.0, keyword_weight=1.0, candidates=60, note_scorer="weighted_max_sum"
)
MIN_GAIN = 0.01  # objective points (≈ 2 dev questions) needed to move away from a default
SCORERS = ("weighted_max_sum", "max", "max_decayed_sum", "sum")
RRF_KS = (0.0, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 40.0, 60.0, 100.0)
WEIGHTS = ((1.0, 1.0), (1.25, 1.0), (1.5, 1.0), (2.0, 1.0), (1.0, 1.25), (1.0, 1.5), (1.0, 2.0))
CANDIDATES = (60, 150, 300)
BM25_COLUMNS = ((1.0, 1.0), (2.0, 1.0), (4.0, 1.0), (0.5, 1.0))


def objective(m: Metrics) -> float:
    """What tuning maximises: the mean of Recall@3 and MRR@3 (citation order)."""
    return (m.recall[3] + m.mrr3) / 2


@dataclass(frozen=True, slots=True)
class Trial:
    """One configuration tried on dev."""

    stage: str
    search: SearchConfig
    metrics: Metrics

    @property
    def score(self) -> float:
        return objective(self.metrics)


def describe_config(s: SearchConfig) -> str:
    """A compact description of a search configuration."""
    r = s.ranking
    text = (
        f"{r.note_scorer}, rrf_k={r.rrf_k:g}, weights v{r.vector_weight:g}/k{r.keyword_weight:g}"
        f", candidates={r.candidates}"
    )
    if (s.heading_weight, s.content_weight) != (1.0, 1.0):
        text += f", bm25 heading×{s.heading_weight:g}"
    return text


def changed_knobs(a: SearchConfig, b: SearchConfig) -> int:
    """How many tunable values differ between two configurations."""
    pairs = [
        (a.ranking.rrf_k, b.ranking.rrf_k),
        (a.ranking.vector_weight, b.ranking.vector_weight),
        (a.ranking.keyword_weight, b.ranking.keyword_weight),
        (a.ranking.candidates, b.ranking.candidates),
        (a.ranking.note_scorer, b.ranking.note_scorer),
        (a.heading_weight, b.heading_weight),
        (a.content_weight, b.content_weight),
    ]
    return sum(1 for x, y in pairs if x != y)


def pick(incumbent: Trial, tried: Sequence[Trial]) -> Trial:
    """The stage's winner: among trials within `MIN_GAIN` of the best score (incumbent
    included), the one closest to the incumbent, then the higher score."""
    pool = [incumbent, *tried]
    top = max(t.score for t in pool)
    near = [t for t in pool if t.score >= top - MIN_GAIN]
    return min(near, key=lambda t: (changed_knobs(t.search, incumbent.search), -t.score))


async def _stage(
    corpus: EvalCorpus,
    questions: Sequence[Question],
    name: str,
    configs: list[SearchConfig],
    incumbent: Trial,
    trials: list[Trial],
) -> Trial:
    tried = []
    for cfg in configs:
        if cfg == incumbent.search:
            continue
        run = await corpus.evaluate(questions, cfg, label=name)
        trial = Trial(name, cfg, run.metrics)
        tried.append(trial)
        log.info("tuning.trial", stage=name, config=describe_config(cfg), score=trial.score)
    trials.extend(tried)
    return pick(incumbent, tried)


async def tune_on_dev(
    corpus: EvalCorpus, dev: Sequence[Question], start: SearchConfig
) -> tuple[Trial, Trial, list[Trial], Trial]:
    """Staged search from `start`; returns (start, best RankingConfig trial, all trials,
    best trial once BM25 column weights may change too)."""
    base_run = await corpus.evaluate(dev, start, label="start")
    first = Trial("start", start, base_run.metrics)
    trials: list[Trial] = [first]

    def ranked(**changes: object) -> SearchConfig:
        return replace(best.search, ranking=replace(best.search.ranking, **changes))

    best = first
    best = await _stage(
        corpus,
        dev,
        "scorer × rrf_k",
        [ranked(note_scorer=s, rrf_k=k) for s in SCORERS for k in RRF_KS],
        best,
        trials,
    )
    best = await _stage(
        corpus,
        dev,
        "weights",
        [ranked(vector_weight=v, keyword_weight=w) for v, w in WEIGHTS],
        best,
        trials,
    )
    best = await _stage(
        corpus, dev, "candidates", [ranked(candidates=c) for c in CANDIDATES], best, trials
    )
    ranking_best = best
    columns = [replace(best.search, heading_weight=h, content_weight=c) for h, c in BM25_COLUMNS]
    with_columns = await _stage(corpus, dev, "bm25 columns", columns, best, trials)
    return first, ranking_best, trials, with_columns


def paired_gain(
    a: Sequence[QuestionOutcome], b: Sequence[QuestionOutcome], ids: set[str] | None = None
) -> dict[str, tuple[float, float, float]]:
    """`a` minus `b` on the same questions (those in `ids`, default all): Recall@3 and
    MRR@3 differences with their 95 % paired-bootstrap intervals."""
    by_id = {o.question_id: o for o in b}
    pairs = [(o, by_id[o.question_id]) for o in a if ids is None or o.question_id in ids]
    hit = [(1.0 if x.rank is not None and x.rank <= 3 else 0.0) for x, _ in pairs]
    hit_b = [(1.0 if y.rank is not None and y.rank <= 3 else 0.0) for _, y in pairs]
    rr = [reciprocal(x.rank, 3) for x, _ in pairs]
    rr_b = [reciprocal(y.rank, 3) for _, y in pairs]
    return {"recall3": paired_difference(hit, hit_b), "mrr3": paired_difference(rr, rr_b)}


def moved_knobs(start: RankingConfig, end: RankingConfig) -> list[str]:
    """`name a → b` for every ranking knob that differs."""
    return [
        f"{name} {getattr(start, name)} → {getattr(end, name)}"
        for name in (
            "rrf_k",
            "vector_weight",
            "keyword_weight",
            "candidates",
            "note_scorer",
            "section_scorer",
        )
        if getattr(start, name) != getattr(end, name)
    ]


def ranking_code(r: RankingConfig) -> str:
    """The `RankingConfig(...)` call for a configuration (for the report)."""
    return (
        f"RankingConfig(rrf_k={r.rrf_k:g}, vector_weight={r.vector_weight:g}, "
        f"keyword_weight={r.keyword_weight:g}, candidates={r.candidates}, "
        f'note_scorer="{r.note_scorer}", section_scorer="{r.section_scorer}")'
    )
