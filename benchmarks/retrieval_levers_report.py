"""Analysis and write-up of `benchmarks/retrieval_levers.py` (pure, given the runs).

Relevance is fitted on the dev sections of the shipped runs of every set (pooled) and
checked on their test sections. Each lever is compared with the shipped ranking on the
same questions; within a family the lever with the best dev objective (mean of Recall@3
and MRR@3, pooled over sets) is the candidate, and it ships only if its pooled test
difference in that objective is positive with a 95 % interval above 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from api.evaluation.metrics import aggregate, paired_difference, reciprocal
from api.retrieval.relevance import FEATURES, RelevanceModel
from benchmarks.relevance_fit import (
    Abstention,
    Reliability,
    abstention_at,
    choose_threshold,
    fit_logistic,
    reliability,
)
from benchmarks.retrieval_levers_e5 import E5_LEVER
from benchmarks.retrieval_levers_eval import (
    SEARCH_LEVERS,
    SHIPPED,
    QuestionRecord,
    SetResult,
    by_relevance,
    reorder,
    with_note_context,
)

COMMAND = "python -m benchmarks.retrieval_levers"
KEYWORD_FEATURES = ("bm25", "bm25_share", "coverage", "rank_prior")
NOTE_WEIGHTS = (0.3, 1.0)
EXTERNAL = ("docs", "chroma")
Gain = tuple[float, float, float]


@dataclass
class LeverRow:
    name: str
    family: str
    dev_gain: float  # objective, pooled dev
    test: dict[str, dict[str, Gain]]  # set (or "pooled") → metric → paired difference
    latency: float | None = None  # median time ratio to the shipped search
    candidate: bool = False
    ships: bool = False


@dataclass
class Analysis:
    full: RelevanceModel
    keyword: RelevanceModel
    calibration: dict[str, Reliability]  # "pooled", per set; full model on test
    keyword_calibration: Reliability
    levers: list[LeverRow] = field(default_factory=list)
    headline: dict[str, dict[str, float]] = field(default_factory=dict)
    abstention: Abstention | None = None
    abstention_test: dict[str, Abstention] = field(default_factory=dict)
    relevance_us: float = 0.0


def _split(records: Sequence[QuestionRecord], ids: set[str]) -> list[QuestionRecord]:
    return [r for r in records if r.question_id in ids]


def _objective_terms(rec: QuestionRecord) -> float:
    rank = rec.outcome.rank
    return ((1.0 if rank is not None and rank <= 3 else 0.0) + reciprocal(rank, 3)) / 2


def _gains(a: Sequence[QuestionRecord], b: Sequence[QuestionRecord]) -> dict[str, Gain]:
    by_id = {r.question_id: r for r in b}
    pairs = [(x, by_id[x.question_id]) for x in a]

    def hit(r: QuestionRecord) -> float:
        return 1.0 if r.outcome.rank is not None and r.outcome.rank <= 3 else 0.0

    return {
        "recall3": paired_difference([hit(x) for x, _ in pairs], [hit(y) for _, y in pairs]),
        "mrr3": paired_difference(
            [reciprocal(x.outcome.rank, 3) for x, _ in pairs],
            [reciprocal(y.outcome.rank, 3) for _, y in pairs],
        ),
        "objective": paired_difference(
            [_objective_terms(x) for x, _ in pairs], [_objective_terms(y) for _, y in pairs]
        ),
    }


def _sections(results: Sequence[SetResult], split: str) -> tuple[list[dict], list[int]]:
    """Features and labels of every section returned for the split's questions: the set's
    own (answerable) and the off-topic ones (every section a miss), so the probability
    holds for a mix of answerable and unanswerable questions, as users ask them."""
    rows, labels = [], []
    for res in results:
        own = _split(res.runs[SHIPPED.name], res.splits[split])
        for rec in [*own, *res.foreign[split]]:
            for s in rec.sections:
                rows.append(s.features)
                labels.append(int(s.hit))
    return rows, labels


def _calibration(results: Sequence[SetResult], model: RelevanceModel) -> dict[str, Reliability]:
    out = {}
    for res in [None, *results]:
        chosen = results if res is None else [res]
        rows, labels = _sections(chosen, "test")
        out["pooled" if res is None else res.name] = reliability(
            [model.probability(r) for r in rows], labels
        )
    return out


def _variants(results: Sequence[SetResult], full: RelevanceModel) -> dict[str, tuple[str, dict]]:
    """Lever name → (family, set → records)."""
    out: dict[str, tuple[str, dict]] = {}
    for lever in SEARCH_LEVERS:
        out[lever.name] = (lever.family, {r.name: r.runs[lever.name] for r in results})
    if any(E5_LEVER in r.runs for r in results):  # sets without it: not run
        out[E5_LEVER] = (
            "embedding model",
            {r.name: r.runs[E5_LEVER] for r in results if E5_LEVER in r.runs},
        )
    base = {r.name: r.runs[SHIPPED.name] for r in results}
    data = {r.name: r.dataset for r in results}
    out["sections ranked by relevance"] = (
        "section scoring",
        {n: reorder(recs, data[n], by_relevance(full)) for n, recs in base.items()},
    )
    for w in NOTE_WEIGHTS:
        out[f"section score + {w:g} × note score"] = (
            "section scoring",
            {n: reorder(recs, data[n], with_note_context(w)) for n, recs in base.items()},
        )
    return out


def _lever_rows(results: Sequence[SetResult], full: RelevanceModel) -> list[LeverRow]:
    rows = []
    for name, (family, runs) in _variants(results, full).items():
        dev_a, dev_b, test = [], [], {}
        pooled_a, pooled_b = [], []
        for res in (r for r in results if r.name in runs):
            base = res.runs[SHIPPED.name]
            dev_a += _split(runs[res.name], res.splits["dev"])
            dev_b += _split(base, res.splits["dev"])
            ta, tb = _split(runs[res.name], res.splits["test"]), _split(base, res.splits["test"])
            test[res.name] = _gains(ta, tb)
            pooled_a += ta
            pooled_b += tb
        test["pooled"] = _gains(pooled_a, pooled_b)
        lat = [r.latency[name] for r in results if name in r.latency]
        rows.append(
            LeverRow(
                name,
                family,
                _gains(dev_a, dev_b)["objective"][0],
                test,
                sum(lat) / len(lat) if lat else None,
            )
        )
    for family in {r.family for r in rows}:
        best = max((r for r in rows if r.family == family), key=lambda r: r.dev_gain)
        if best.dev_gain > 0:
            best.candidate = True
            best.ships = best.test["pooled"]["objective"][1] > 0
    return rows


def _abstention(
    results: Sequence[SetResult], model: RelevanceModel, split: str
) -> tuple[list, list]:
    answerable, unanswerable = [], []
    for res in results:
        for rec in _split(res.runs[SHIPPED.name], res.splits[split]):
            cited = sorted(rec.sections, key=lambda s: -s.score)  # chat's reference order
            answerable.append([(model.probability(s.features), s.hit) for s in cited])
        for rec in res.foreign[split]:
            unanswerable.append([model.probability(s.features) for s in rec.sections])
    return answerable, unanswerable


def analyse(results: Sequence[SetResult]) -> Analysis:
    rows, labels = _sections(results, "dev")
    full = fit_logistic(rows, labels, FEATURES, name="local-minilm")
    keyword = fit_logistic(rows, labels, KEYWORD_FEATURES, name="keyword")
    krows, klabels = _sections(results, "test")
    an = Analysis(
        full,
        keyword,
        _calibration(results, full),
        reliability([keyword.probability(r) for r in krows], klabels),
    )
    an.levers = _lever_rows(results, full)
    for res in results:
        m = {
            s: aggregate([r.outcome for r in _split(res.runs[SHIPPED.name], ids)])
            for s, ids in res.splits.items()
        }
        an.headline[res.name] = {
            f"{s} {k}": v
            for s, mm in m.items()
            for k, v in (("R@3", mm.recall[3]), ("MRR@3", mm.mrr3))
        }
    an.abstention, _ = choose_threshold(*_abstention(results, full, "dev"))
    for res in [None, *results]:
        chosen = results if res is None else [res]
        a, u = _abstention(chosen, full, "test")
        an.abstention_test["pooled" if res is None else res.name] = abstention_at(
            an.abstention.threshold, a, u
        )
    return an


def _pts(g: Gain) -> str:
    return f"{g[0] * 100:+.1f} ({g[1] * 100:+.1f} … {g[2] * 100:+.1f})"


def render(results: Sequence[SetResult], an: Analysis) -> str:
    from benchmarks.retrieval_levers_text import render_text

    return render_text(results, an)


def claims(results: Sequence[SetResult], an: Analysis) -> list:
    from benchmarks.retrieval_levers_text import claim_cells

    return claim_cells(results, an)
