"""Fitting and checking the relevance model, and choosing chat's abstention threshold (pure).

- `fit_logistic`: L2-regularised logistic regression by Newton's method (IRLS) on section
  features (`api.retrieval.relevance.FEATURES`) and 0/1 labels (the section overlaps a gold
  span of its question).
- `reliability`: predicted vs observed rate per probability bin, expected calibration
  error and Brier score, on held-out sections.
- `choose_threshold`: the `CHAT_MIN_RELEVANCE` that best separates answerable questions
  (whose best section must reach it, and whose gold section must be among the first 3
  citations) from unanswerable ones (whose best section must not), on dev.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from api.retrieval.relevance import RelevanceModel

BINS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0001)
THRESHOLDS = tuple(round(x, 2) for x in np.arange(0.05, 0.951, 0.025))


def fit_logistic(
    rows: Sequence[dict[str, float]],
    labels: Sequence[int],
    features: Sequence[str],
    *,
    name: str,
    l2: float = 1.0,
    iterations: int = 50,
) -> RelevanceModel:
    """The logistic model of `labels` on `features` of `rows` (a missing feature is 0);
    the intercept is not penalised."""
    x = np.array([[1.0, *(r.get(f, 0.0) for f in features)] for r in rows], dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    w = np.zeros(x.shape[1])
    penalty = np.eye(x.shape[1]) * l2
    penalty[0, 0] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ w, -30, 30)))
        gradient = x.T @ (p - y) + penalty @ w
        hessian = (x * (p * (1 - p))[:, None]).T @ x + penalty
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    weights = {f: round(float(v), 4) for f, v in zip(features, w[1:], strict=True)}
    return RelevanceModel(name=name, intercept=round(float(w[0]), 4), weights=weights)


@dataclass(frozen=True, slots=True)
class Reliability:
    """Calibration on held-out sections: per bin (low, high, sections, mean predicted,
    observed share), expected calibration error and Brier score."""

    bins: list[tuple[float, float, int, float, float]]
    ece: float
    brier: float
    sections: int


def reliability(predicted: Sequence[float], labels: Sequence[int]) -> Reliability:
    """Predicted probability against the observed share of relevant sections, per bin."""
    p = np.asarray(predicted, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    rows = []
    ece = 0.0
    for lo, hi in itertools.pairwise(BINS):
        mask = (p >= lo) & (p < hi)
        n = int(mask.sum())
        if n == 0:
            continue
        mean_p, rate = float(p[mask].mean()), float(y[mask].mean())
        rows.append((lo, min(hi, 1.0), n, mean_p, rate))
        ece += n / len(p) * abs(mean_p - rate)
    brier = float(((p - y) ** 2).mean()) if len(p) else 0.0
    return Reliability(rows, ece, brier, len(p))


@dataclass(frozen=True, slots=True)
class Abstention:
    """At one threshold: answerable questions still answered with their gold section among
    the first 3 citations, and unanswerable questions left with no citation."""

    threshold: float
    answered: float
    abstained: float

    @property
    def balanced(self) -> float:
        return (self.answered + self.abstained) / 2


def abstention_at(
    threshold: float,
    answerable: Sequence[Sequence[tuple[float, bool]]],
    unanswerable: Sequence[Sequence[float]],
) -> Abstention:
    """Chat's rule: a question whose best section's relevance is below `threshold` gets no
    citation; otherwise its sections are cited as search ranked them. `answerable`: per
    question, its sections in citation order as (relevance, hits gold); `unanswerable`:
    per question, its sections' relevances."""

    def answered(sections: Sequence[tuple[float, bool]]) -> bool:
        best = max((rel for rel, _ in sections), default=0.0)
        return best >= threshold and any(hit for _, hit in sections[:3])

    ok = sum(answered(q) for q in answerable) / max(len(answerable), 1)
    quiet = sum(max(q, default=0.0) < threshold for q in unanswerable) / max(len(unanswerable), 1)
    return Abstention(threshold, ok, quiet)


def choose_threshold(
    answerable: Sequence[Sequence[tuple[float, bool]]],
    unanswerable: Sequence[Sequence[float]],
) -> tuple[Abstention, list[Abstention]]:
    """The threshold with the best balanced rate on these questions (of equals, the
    lowest: it drops fewest answers), and every threshold tried."""
    tried = [abstention_at(t, answerable, unanswerable) for t in THRESHOLDS]
    best = max(tried, key=lambda a: (round(a.balanced, 6), -a.threshold))
    return best, tried
