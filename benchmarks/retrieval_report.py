"""Markdown tables for the `retrieval` section of BENCHMARKS.md (pure formatting)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from api.evaluation.metrics import Metrics
from benchmarks.common import markdown_table
from benchmarks.retrieval_latency import LatencyResult
from benchmarks.retrieval_quality import SplitMetrics
from benchmarks.retrieval_tuning import Trial, describe_config

MB = 2**20


@dataclass
class Results:
    """Everything the write-up needs."""

    splits: list[str]
    modes: list[SplitMetrics] = field(default_factory=list)
    rankings: list[SplitMetrics] = field(default_factory=list)
    chunkers: list[SplitMetrics] = field(default_factory=list)
    baselines: list[SplitMetrics] = field(default_factory=list)
    sizes: list[SplitMetrics] = field(default_factory=list)
    trials: list[Trial] = field(default_factory=list)
    tuned: Trial | None = None
    tuned_columns: Trial | None = None
    gains: dict[str, dict[str, tuple[float, float, float]]] = field(default_factory=dict)
    latency: list[LatencyResult] = field(default_factory=list)
    corpus: str = ""
    errors: list[str] = field(default_factory=list)
    size_gains: dict[str, dict[str, tuple[float, float, float]]] = field(default_factory=dict)


def _f(x: float) -> str:
    return f"{x:.3f}"


def quality_table(rows: Sequence[SplitMetrics], primary: str, secondary: str | None) -> str:
    """One row per configuration: the primary split in full, the other split's headline."""
    headers = [
        "configuration",
        "R@1",
        "R@3",
        "R@5",
        "MRR@3",
        "R@3 95% CI",
        "strict R@3",
        "R@3 search order",
        "note R@1",
        "note R@3",
        "cited chars (top 3)",
    ]
    if secondary:
        headers += [f"{secondary} R@3", f"{secondary} MRR@3"]
    body = []
    for r in rows:
        m = r.splits[primary]
        lo, hi = m.recall3_ci
        cells = [
            r.label,
            _f(m.recall[1]),
            f"**{_f(m.recall[3])}**",
            _f(m.recall[5]),
            f"**{_f(m.mrr3)}**",
            f"{lo:.2f}–{hi:.2f}",
            _f(m.strict_recall[3]),
            _f(m.search_recall[3]),
            _f(m.note_recall[1]),
            _f(m.note_recall[3]),
            f"{m.mean_top3_chars:,.0f}",
        ]
        if secondary:
            s = r.splits[secondary]
            cells += [_f(s.recall[3]), _f(s.mrr3)]
        body.append(cells)
    return markdown_table(headers, body)


def sizes_table(rows: Sequence[SplitMetrics], splits: Sequence[str]) -> str:
    """max_chunk_tokens → chunks and headline metrics per split."""
    headers = ["max_chunk_tokens", "chunks", "mean tokens"]
    for s in splits:
        headers += [f"{s} R@1", f"{s} R@3", f"{s} MRR@3"]
    body = []
    for r in rows:
        cells = [r.label, str(r.chunks), f"{r.mean_chunk_tokens or 0:.0f}"]
        for s in splits:
            m = r.splits[s]
            cells += [_f(m.recall[1]), _f(m.recall[3]), _f(m.mrr3)]
        body.append(cells)
    return markdown_table(headers, body)


def by_type_table(rows: Sequence[SplitMetrics], split: str) -> str:
    """Recall@3 per question type for a few configurations."""
    types = sorted({t for r in rows for t in r.splits[split].recall3_by_type})
    headers = [
        "configuration",
        *[f"{t} ({rows[0].splits[split].recall3_by_type[t][0]})" for t in types],
    ]
    body = []
    for r in rows:
        by = r.splits[split].recall3_by_type
        body.append([r.label, *[_f(by[t][1]) if t in by else "—" for t in types]])
    return markdown_table(headers, body)


def tuning_table(trials: Sequence[Trial]) -> str:
    """Every configuration tried on dev, in the order tried."""
    headers = ["stage", "configuration", "R@1", "R@3", "MRR@3", "objective", "R@3 search order"]
    body = [
        [
            t.stage,
            describe_config(t.search),
            _f(t.metrics.recall[1]),
            _f(t.metrics.recall[3]),
            _f(t.metrics.mrr3),
            f"{t.score:.4f}",
            _f(t.metrics.search_recall[3]),
        ]
        for t in trials
    ]
    return markdown_table(headers, body)


def latency_table(rows: Sequence[LatencyResult]) -> str:
    """Latency percentiles (wall clock and CPU) and memory per index size."""
    headers = [
        "chunks (notes)",
        "search P50 / P95 / P99 ms",
        "search CPU P50 / P95 ms",
        "serial search P50 / P95 ms (baseline)",
        "serial / search P95",
        "query embedding P50 / P95 ms",
        "vector scan P50 / P95 ms (CPU P50 / P95)",
        "BM25 P50 / P95 ms (CPU P50 / P95)",
        "notes re-check P50 / P95 ms",
        "re-check of all candidate notes P50 / P95 ms (baseline; mean notes)",
        "memory_bytes()",
        "RSS delta",
        "build s",
        "load avg",
    ]
    body = [
        [
            f"{r.chunks:,} ({r.notes:,})",
            f"{r.search.p50:.1f} / **{r.search.p95:.1f}** / {r.search.p99:.1f}",
            f"{r.search_cpu.p50:.1f} / {r.search_cpu.p95:.1f}",
            f"{r.serial.p50:.1f} / {r.serial.p95:.1f}",
            f"{r.serial.p95 / r.search.p95:.2f}×",
            f"{r.embed.p50:.1f} / {r.embed.p95:.1f}",
            f"{r.vector.p50:.1f} / {r.vector.p95:.1f} "
            f"({r.vector_cpu.p50:.1f} / {r.vector_cpu.p95:.1f})",
            f"{r.keyword.p50:.1f} / {r.keyword.p95:.1f} "
            f"({r.keyword_cpu.p50:.1f} / {r.keyword_cpu.p95:.1f})",
            f"{r.recheck.p50:.1f} / {r.recheck.p95:.1f}",
            f"{r.recheck_all.p50:.1f} / {r.recheck_all.p95:.1f} ({r.candidates:.0f})",
            f"{r.memory_bytes / MB:.0f} MB",
            f"{r.rss_delta_bytes / MB:.0f} MB",
            f"{r.build_s:.1f}",
            f"{r.load_avg:.1f}",
        ]
        for r in rows
    ]
    return markdown_table(headers, body)


def gain(ours: Metrics, base: Metrics) -> str:
    """`+x %` relative change of the headline metrics (— when the base is 0)."""

    def rel(a: float, b: float) -> str:
        return f"{(a / b - 1) * 100:+.0f} %" if b > 0 else "—"

    return (
        f"Recall@3 {_f(ours.recall[3])} vs {_f(base.recall[3])} "
        f"({rel(ours.recall[3], base.recall[3])}), "
        f"MRR@3 {_f(ours.mrr3)} vs {_f(base.mrr3)} ({rel(ours.mrr3, base.mrr3)}), "
        f"note Recall@1 {_f(ours.note_recall[1])} vs {_f(base.note_recall[1])} "
        f"({rel(ours.note_recall[1], base.note_recall[1])})"
    )
