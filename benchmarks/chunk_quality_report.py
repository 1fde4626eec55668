"""The chunk-quality sections of BENCHMARKS.md: tables, acceptance verdicts and intervals.

Pure formatting over `Result`s from `benchmarks.chunk_quality`. Each acceptance verdict
carries the 95 % bootstrap interval of the score (questions resampled), and ours is compared
with the in-run baseline on the same questions (paired bootstrap), because recall moves by
about a point between near-identical variants on 472 questions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api.evaluation.metrics import bootstrap_ci, paired_difference
from benchmarks.chroma_eval import Scores
from benchmarks.common import code_revision, machine_note, markdown_table

PUBLISHED = [  # the report's all-MiniLM-L6-v2 rows used for comparison (recall, precision, IoU)
    ("RecursiveCharacterTextSplitter 200/0 (published)", 75.7, 6.5, 6.5),
    ("TokenTextSplitter 200/0 (published)", 76.6, 4.1, 4.1),
    ("ClusterSemanticChunker 200 (published)", 75.2, 7.2, 7.2),
]
TARGET_RECALL, TARGET_IOU = 75.7, 6.5

OURS = "ours 200 (MiniLM word pieces)"
OURS_UNTITLED = "ours 200, untitled"
OURS_TARGET = "ours 200, target 120 (MiniLM word pieces)"
OURS_TARGET_UNTITLED = "ours 200, target 120, untitled"
SWEEP_TARGETS = (110, 130, 140)  # besides 120, the target held to acceptance
SIZE_MATCHED = "ours 180 (MiniLM, size-matched to baseline)"
BASELINE = "RecursiveCharacterTextSplitter 200/0 (in-run)"
# (label, how the verdict names it): the configurations held to the acceptance target.
CANDIDATES = [
    (OURS, "ours 200 (default packing), titled"),
    (OURS_UNTITLED, "ours 200 (default packing), untitled"),
    (OURS_TARGET, "ours 200 with CHUNKING_TARGET_TOKENS=120, titled"),
    (OURS_TARGET_UNTITLED, "ours 200 with CHUNKING_TARGET_TOKENS=120, untitled"),
]


@dataclass(slots=True)
class Result:
    """Scores of one chunker in both retrieval scopes plus its chunk-size profile."""

    label: str
    corpus: Scores
    global_: Scores
    sizes: dict[str, float]


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _signed(x: float) -> str:
    return f"{100 * x:+.1f}"


def _column(scores: Scores, metric: int) -> list[float]:
    return [row[metric] for row in scores.per_question]


def _with_ci(scores: Scores, metric: int, target: float | None = None) -> str:
    value = (scores.recall, scores.precision, scores.iou)[metric]
    notes = []
    if scores.per_question:
        lo, hi = bootstrap_ci(_column(scores, metric))
        notes.append(f"95 % CI {_pct(lo)}–{_pct(hi)}")
    if target is not None:
        notes.append(f"target ≥ {target}")
    return f"{_pct(value)} ({'; '.join(notes)})" if notes else _pct(value)


def render(
    results: list[Result],
    n_questions: int,
    k: int,
    network: list[str],
    revision: str | None = None,
    fp32: bool = False,
) -> str:
    """A chunk-quality section of BENCHMARKS.md (`revision`: the chunker's, at start)."""
    revision = revision or code_revision("api/services/chunking")
    rows: list[list[Any]] = []
    for r in results:
        z = r.sizes
        rows.append(
            [
                r.label,
                int(z["chunks"]),
                f"{z['mean_tokens']:.0f} ({z['p10_tokens']:.0f}–{z['p90_tokens']:.0f})",
                f"{100 * z['small_share']:.0f}%",
                int(z["over_model_limit"]),
                *(_pct(v) for v in (r.corpus.recall, r.corpus.precision, r.corpus.iou)),
                *(_pct(v) for v in (r.global_.recall, r.global_.precision, r.global_.iou)),
            ]
        )
    for label, rec, prec, iou in PUBLISHED:
        rows.append([label, "", "", "", "", "", "", "", rec, prec, iou])
    main = markdown_table(
        [
            "chunker",
            "chunks",
            "mean cl100k tokens (p10–p90)",
            "< 50 tok",
            "truncated",
            "recall",
            "precision",
            "IoU",
            "recall (all corpora)",
            "precision (all)",
            "IoU (all)",
        ],
        rows,
    )
    corpora = list(results[0].corpus.per_corpus) if results else []
    per_corpus = markdown_table(
        ["chunker (recall / IoU, own-corpus retrieval)", *corpora],
        [
            [
                r.label,
                *(
                    f"{_pct(r.corpus.per_corpus[c][0])} / {_pct(r.corpus.per_corpus[c][2])}"
                    for c in corpora
                ),
            ]
            for r in results
        ],
    )
    model = (
        "the report's own model: all-MiniLM-L6-v2 float32 weights (`benchmarks/minilm_fp32.py`,"
        " numpy; cosine agreement with the int8 model ≈ 0.9994)"
        if fp32
        else "local embedder (all-MiniLM-L6-v2 int8 ONNX)"
    )
    lines = [
        "## Chunk retrieval quality (Chroma evaluation" + (", float32 model)" if fp32 else ")"),
        "",
        "Reproduce: `.venv/bin/python -m benchmarks.chunk_quality"
        + (" --fp32" if fp32 else "")
        + "` (embeddings cached in `benchmarks/.data/`).",
        "",
        machine_note() + f" Chunker at {revision}.",
        "",
        f"{n_questions} questions, top {k} chunks by cosine similarity, {model}. "
        "Metrics in % on character ranges as in the report "
        "(precision over Σ|retrieved|). *recall/precision/IoU*: candidates restricted to the "
        "question's corpus; *(all corpora)*: one index over all five corpora, as the report's "
        "code does — the published rows are of that kind. *truncated*: chunks whose embedded "
        "text exceeds the model's 254 word pieces (the model would cut them). Published rows "
        "used sentence-transformers fp32 with Chroma's HNSW index; ours uses exact search. "
        "*titled*: the corpus id is the note title, so every chunk's embedded text starts with "
        "it, as indexing does with a note's title; *untitled*: empty title, so the embedded "
        "text is the chunk alone, as the report (and every peer here) embeds it — the corpora "
        "have no titles.",
        "",
        main,
        "",
        per_corpus,
        "",
        *acceptance_lines(results),
        "",
        f"Network attempts during the run: {len(network)}.",
    ]
    return "\n".join(lines)


def acceptance_lines(results: list[Result]) -> list[str]:
    """The acceptance verdicts for ours at ~200 tokens, plus automatic diagnostics."""
    by = {r.label: r for r in results}
    ours = by.get(OURS)
    if ours is None:
        return []
    out = []
    for label, name in CANDIDATES:
        res = by.get(label)
        if res is None:
            continue
        for scope, sc in (("own-corpus", res.corpus), ("all-corpora", res.global_)):
            ok = 100 * sc.recall >= TARGET_RECALL and 100 * sc.iou >= TARGET_IOU
            out.append(
                f"- Acceptance ({scope} retrieval): {name}: recall "
                f"{_with_ci(sc, 0, TARGET_RECALL)}, IoU {_with_ci(sc, 2, TARGET_IOU)} → "
                f"**{'PASS' if ok else 'FAIL'}**."
            )
    base = by.get(BASELINE)
    if base is not None:
        out.extend(_against_baseline(by, base))
        _, pub_recall, _, pub_iou = PUBLISHED[0]
        out.append(
            f"- Reproduction: the in-run baseline (same algorithm as the published "
            f"RecursiveCharacterTextSplitter 200/0 row) scores recall "
            f"{_with_ci(base.global_, 0)} vs {pub_recall}, IoU {_with_ci(base.global_, 2)} vs "
            f"{pub_iou} (all corpora)."
        )
    untitled = by.get(OURS_UNTITLED)
    if untitled is not None:
        out.append(
            f"- Title effect (own-corpus; titled vs untitled, same chunks): recall "
            f"{_pct(ours.corpus.recall)} vs {_pct(untitled.corpus.recall)}, IoU "
            f"{_pct(ours.corpus.iou)} vs {_pct(untitled.corpus.iou)}."
        )
    if base is not None:
        out.append(
            f"- Chunk size: ours 200 has {ours.sizes['chunks']:.0f} chunks of mean "
            f"{ours.sizes['mean_tokens']:.0f} cl100k tokens ({100 * ours.sizes['small_share']:.0f}%"
            f" under 50) vs the in-run baseline's {base.sizes['chunks']:.0f} of mean "
            f"{base.sizes['mean_tokens']:.0f} ({100 * base.sizes['small_share']:.0f}% under 50); "
            f"in-run baseline recall {_pct(base.corpus.recall)}, IoU {_pct(base.corpus.iou)}."
        )
    matched = by.get(SIZE_MATCHED)
    if base is not None and matched is not None:
        out.append(
            f"- At equal chunk size (ours 180 word pieces: {matched.sizes['chunks']:.0f} chunks,"
            f" mean {matched.sizes['mean_tokens']:.0f}): recall {_pct(matched.corpus.recall)} vs "
            f"{_pct(base.corpus.recall)}, IoU {_pct(matched.corpus.iou)} vs "
            f"{_pct(base.corpus.iou)} (own-corpus); all corpora: recall "
            f"{_pct(matched.global_.recall)} vs {_pct(base.global_.recall)}, IoU "
            f"{_pct(matched.global_.iou)} vs {_pct(base.global_.iou)}."
        )
    out.extend(_size_sweep(results))
    out.extend(_target_sweep(results))
    return out


def _against_baseline(by: dict[str, Result], base: Result) -> list[str]:
    """Ours minus the in-run baseline on the same questions, all corpora, with intervals."""
    parts = []
    for label, name in CANDIDATES:
        res = by.get(label)
        if res is None or not res.global_.per_question or not base.global_.per_question:
            continue
        cells = []
        for metric, metric_name in ((0, "recall"), (2, "IoU")):
            mean, lo, hi = paired_difference(
                _column(res.global_, metric), _column(base.global_, metric)
            )
            cells.append(f"{metric_name} {_signed(mean)} ({_signed(lo)} to {_signed(hi)})")
        parts.append(f"{name}: {', '.join(cells)}")
    if not parts:
        return []
    return [
        f"- Ours minus the in-run baseline on the same {len(base.global_.per_question)} "
        "questions (all corpora; mean "
        "difference in points, 95 % paired-bootstrap interval; an interval containing 0 is "
        "noise): " + "; ".join(parts) + "."
    ]


def target_label(target: int, titled: bool) -> str:
    """The row label of ours at 200 tokens packed towards `target` (120: OURS_TARGET*)."""
    if titled:
        return f"ours 200, target {target} (MiniLM word pieces)"
    return f"ours 200, target {target}, untitled"


def _target_sweep(results: list[Result]) -> list[str]:
    """All-corpora recall / IoU of every packing target measured, titled and untitled."""
    by = {r.label: r for r in results}
    cells, both = [], []
    for target in sorted({120, *SWEEP_TARGETS}):
        for titled in (True, False):
            r = by.get(target_label(target, titled))
            if r is None:
                continue
            name = f"{target}{'' if titled else ' untitled'}"
            cells.append(f"{name}: {_pct(r.global_.recall)} / {_pct(r.global_.iou)}")
            if 100 * r.global_.recall >= TARGET_RECALL and 100 * r.global_.iou >= TARGET_IOU:
                both.append(name)
    if len(cells) <= 2:
        return []
    return [
        "- Packing-target sweep at 200 tokens (all corpora, recall / IoU): "
        + "; ".join(cells)
        + (
            f" → meeting both targets: {', '.join(both)} (chosen on the evaluation data "
            "itself: read it as tuning, not as a held-out result)."
            if both
            else " → no target meets both numbers."
        )
    ]


def _size_sweep(results: list[Result]) -> list[str]:
    sweep = sorted(
        (int(r.label.split()[1]), r)
        for r in results
        if r.label.startswith("ours ") and "MiniLM" in r.label and "target" not in r.label
    )
    if len(sweep) <= 1:
        return []
    both = [
        size
        for size, r in sweep
        if 100 * r.corpus.recall >= TARGET_RECALL and 100 * r.corpus.iou >= TARGET_IOU
    ]
    return [
        "- Chunk-size trade-off, ours (own-corpus recall / IoU): "
        + "; ".join(f"{size}: {_pct(r.corpus.recall)} / {_pct(r.corpus.iou)}" for size, r in sweep)
        + (
            f" → sizes meeting both targets: {both}."
            if both
            else " → no measured size meets both targets."
        )
    ]
