"""The chunk-quality report's verdicts and intervals, on hand-made per-question scores."""

from __future__ import annotations

import re

from benchmarks.chroma_eval import Scores
from benchmarks.chunk_quality_report import (
    BASELINE,
    OURS,
    OURS_NEAREST,
    OURS_R5,
    OURS_TITLED,
    Result,
    _size_sweep,
    _target_sweep,
    acceptance_lines,
    claims,
    render,
    size_label,
    target_label,
)

SIZES = {
    "chunks": 10,
    "mean_tokens": 120.0,
    "p10_tokens": 80.0,
    "p90_tokens": 160.0,
    "small_share": 0.0,
    "over_model_limit": 0,
}


def _scores(rows: list[tuple[float, float, float]]) -> Scores:
    n = len(rows)
    recall, precision, iou = (sum(r[i] for r in rows) / n for i in range(3))
    return Scores(recall, precision, iou, {"c": (recall, precision, iou)}, rows)


def _result(label: str, rows: list[tuple[float, float, float]]) -> Result:
    scores = _scores(rows)
    return Result(label, scores, scores, dict(SIZES))


def _line(lines: list[str], *needles: str) -> str:
    found = [ln for ln in lines if all(n in ln for n in needles)]
    assert len(found) == 1, (needles, lines)
    return found[0]


def test_verdicts_use_both_targets_and_carry_intervals() -> None:
    # 40 questions: recall 0.75 or 0.77 (mean 0.76), IoU 0.06 or 0.08 (mean 0.07) → PASS.
    passing = [(0.75, 0.07, 0.06), (0.77, 0.07, 0.08)] * 20
    # Same recall, IoU mean 0.06 → FAIL on IoU alone.
    iou_short = [(0.75, 0.06, 0.05), (0.77, 0.06, 0.07)] * 20
    lines = acceptance_lines([_result(OURS, passing), _result(OURS_TITLED, iou_short)])
    ok = _line(lines, "all-corpora", "defaults), untitled")
    assert ok.endswith("**PASS**.") and "untitled: recall 76.0 (95 % CI " in ok and "IoU 7.0" in ok
    lo, hi = (
        float(x)
        for x in re.search(
            r"recall 76\.0 \(95 % CI ([\d.]+)–([\d.]+); target ≥ 75\.7\)", ok
        ).groups()
    )
    assert 75.0 < lo < 76.0 < hi < 77.0  # the interval brackets the mean, inside the data
    assert _line(lines, "all-corpora", "defaults), titled").endswith("**FAIL**.")
    assert "IoU 7.0 vs 6.0" in _line(lines, "Title effect")


def test_paired_difference_against_the_in_run_baseline_and_between_variants() -> None:
    base = [(0.70, 0.05, 0.05), (0.80, 0.05, 0.06)] * 10
    # Better by exactly 2 recall points and 1 IoU point on every question: a zero-width
    # interval; the titled default is 1 point worse on recall on every question.
    ours = [(r + 0.02, p, i + 0.01) for r, p, i in base]
    worse = [(r - 0.01, p, i) for r, p, i in base]
    lines = acceptance_lines(
        [
            _result(OURS, ours),
            _result(OURS_TITLED, worse),
            _result(OURS_NEAREST, base),
            _result(OURS_R5, worse),
            _result(BASELINE, base),
        ]
    )
    diff = _line(lines, "Ours minus the in-run baseline on the same 20 questions")
    assert "(shipped defaults), untitled: recall +2.0 (+2.0 to +2.0), IoU +1.0" in diff
    assert "(shipped defaults), titled: recall -1.0 (-1.0 to -1.0), IoU +0.0" in diff
    assert "Reproduction" in _line(lines, "in-run baseline (same algorithm")
    variants = _line(lines, "Our variants on the same questions")
    assert "cohesive − nearest-boundary cuts, untitled: recall +2.0 (+2.0 to +2.0)" in variants
    assert "shipped − r5 packing, untitled: recall +3.0 (+3.0 to +3.0), IoU +1.0" in variants
    assert "cuts, titled" not in variants  # its nearest-cut row was not measured


def test_render_has_every_row_and_the_published_ones() -> None:
    rows = [(0.75, 0.07, 0.06), (0.77, 0.07, 0.08)] * 5
    text = render([_result(OURS, rows), _result(BASELINE, rows)], 10, 5, [], revision="abc")
    assert f"| {OURS} | 10 | 120 (80–160) | 0% | 0 | 76.0 | 7.0 | 7.0 |" in text
    assert "| RecursiveCharacterTextSplitter 200/0 (published) |" in text
    assert "*untitled*: empty title" in text and "Chunker at abc." in text


def test_target_and_size_sweeps_name_what_meets_both_numbers() -> None:
    def flat(recall: float, iou: float) -> list[tuple[float, float, float]]:
        return [(recall, iou, iou)] * 4

    results = [
        _result(OURS, flat(0.76, 0.066)),  # meets both
        _result(target_label(120), flat(0.757, 0.064)),  # IoU short
        _result(target_label(140), flat(0.77, 0.060)),
        _result(size_label(160), flat(0.74, 0.072)),
    ]
    line = _line(_target_sweep(results), "Packing target at 200 tokens")
    assert "120: 75.7 / 6.4; 133 (default): 76.0 / 6.6; 140: 77.0 / 6.0" in line
    assert line.endswith("meeting both targets: 133.")
    assert _line(_target_sweep(results[1:]), "Packing target").endswith("none meets both.")
    assert _target_sweep(results[:1]) == []  # the default alone is not a sweep
    sizes = _line(_size_sweep(results), "Chunk-size trade-off")
    assert "160: 74.0 / 7.2; 200: 76.0 / 6.6" in sizes and sizes.endswith("both targets: [200].")


def test_claim_row_is_the_untitled_acceptance_with_the_titled_failure_noted() -> None:
    passing = [(0.75, 0.07, 0.06), (0.77, 0.07, 0.08)] * 20
    iou_short = [(0.75, 0.06, 0.05), (0.77, 0.06, 0.07)] * 20
    (claim,) = claims(
        [
            _result(OURS, passing),
            _result(OURS_TITLED, iou_short),
            _result(BASELINE, iou_short),
        ]
    )
    assert claim.id == "retrieval_chroma" and claim.passed
    assert claim.result.startswith("untitled, own corpus: recall 76.0 (95 % CI ")
    assert "minus the in-run baseline (all corpora): recall +0.0 (+0.0 to +0.0), IoU +1.0" in (
        claim.result
    )
    assert claim.verdict == "**PASS** (titled, own corpus and all corpora: FAIL)"
    assert claims([_result(OURS_TITLED, passing)]) == []
