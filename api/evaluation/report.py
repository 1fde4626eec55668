"""Plain-text summaries of evaluation runs, shared by the CLI scripts and the benchmark."""

from __future__ import annotations

from api.evaluation.harness import EvalRun
from api.evaluation.metrics import Metrics

SUMMARY_HEADERS: tuple[str, ...] = (
    "Recall@1",
    "Recall@3",
    "Recall@5",
    "MRR@3",
    "strict Recall@3",
    "Recall@3 (search order)",
    "note Recall@3",
    "95% CI Recall@3",
    "cited chars (top 3)",
)


def pct(value: float) -> str:
    """A fraction as a 3-decimal string (`0.781`)."""
    return f"{value:.3f}"


def summary_cells(m: Metrics) -> list[str]:
    """The cells of `SUMMARY_HEADERS` for one run."""
    lo, hi = m.recall3_ci
    return [
        pct(m.recall[1]),
        pct(m.recall[3]),
        pct(m.recall[5]),
        pct(m.mrr3),
        pct(m.strict_recall[3]),
        pct(m.search_recall[3]),
        pct(m.note_recall[3]),
        f"{lo:.2f}–{hi:.2f}",
        f"{m.mean_top3_chars:,.0f}",
    ]


def by_type_cells(m: Metrics) -> str:
    """Recall@3 per question type, e.g. `fact 0.80 (56) · paraphrase 0.61 (74)`."""
    return " · ".join(f"{t} {r:.2f} ({n})" for t, (n, r) in m.recall3_by_type.items())


def describe(run: EvalRun) -> str:
    """A few lines describing one run's metrics."""
    m = run.metrics
    lines = [f"{run.label or 'run'}: {m.questions} questions"]
    lines += [f"  {h}: {c}" for h, c in zip(SUMMARY_HEADERS, summary_cells(m), strict=True)]
    lines.append(f"  MRR@10: {pct(m.mrr10)}   MRR@3 (search order): {pct(m.search_mrr3)}")
    lines.append(
        f"  note level: Recall@1 {pct(m.note_recall[1])}, Recall@3 {pct(m.note_recall[3])}, "
        f"MRR@3 {pct(m.note_mrr3)}"
    )
    lines.append(f"  Recall@3 by type: {by_type_cells(m)}")
    return "\n".join(lines)
