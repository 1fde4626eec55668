"""The leave-one-corpus-out check of the cut rule's constants: its selection logic on
made-up scores, and that its constants really reach (and are restored in) the chunker."""

from __future__ import annotations

from benchmarks import common
from benchmarks.chroma_eval import Question, Scores
from benchmarks.chunk_quality_report import Result
from benchmarks.investigations.chunk_quality_holdout import NEAREST, cut_rule, leave_one_out, render

common.set_offline_env()


def _scores(per_question: list[float]) -> Scores:
    rows = [(r, 0.0, r / 10) for r in per_question]
    mean = sum(per_question) / len(per_question)
    return Scores(mean, 0.0, mean / 10, {"a": (mean, 0, 0), "b": (mean, 0, 0)}, rows)


QUESTIONS = [Question(f"q{i}", corpus, ((0, 1),)) for i, corpus in enumerate("aabb")]


def test_each_fold_picks_by_the_other_corpora_only() -> None:
    # x is best on corpus b, y on corpus a: holding out a picks x (chosen on b), and
    # holding out b picks y, so every question is scored by the variant that is worse on it.
    x, y = (0.25, 0.5), (0.5, 0.5)
    scores = {x: _scores([0.1, 0.1, 0.9, 0.9]), y: _scores([0.8, 0.8, 0.2, 0.2])}
    chosen, combined = leave_one_out(scores, QUESTIONS, [x, y])
    assert chosen == {"a": x, "b": y}
    assert [r for r, _, _ in combined] == [0.1, 0.1, 0.2, 0.2]


def test_a_variant_best_everywhere_is_chosen_in_every_fold() -> None:
    x, y = (0.5, 0.5), (0.75, 1.0)
    scores = {x: _scores([0.6, 0.6, 0.6, 0.6]), y: _scores([0.5, 0.5, 0.5, 0.5])}
    scores[NEAREST] = _scores([0.4, 0.4, 0.4, 0.4])
    chosen, combined = leave_one_out(scores, QUESTIONS, [x, y])
    assert set(chosen.values()) == {x}
    assert combined == scores[x].per_question
    sizes = {"chunks": 10, "mean_tokens": 120.0}
    results = {v: Result(str(v), s, s, sizes) for v, s in scores.items()}
    text = render(results, QUESTIONS, [x, y], "rev", [])
    assert "recall 60.0, IoU 6.0" in text and "(shipped)" in text


def test_cut_rule_changes_the_chunks_and_restores_the_constants() -> None:
    from api.chunking import MarkdownChunker, markdown, packing

    words = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega".split()
    text = "\n\n".join(
        " ".join(words[(i * 7 + j) % len(words)] for j in range(40)) + "." for i in range(60)
    )
    chunker = MarkdownChunker(200)
    before = [(c.start_offset, c.end_offset) for c in chunker.chunk_note(text, "")]
    saved = (packing.COHESION_REACH, packing.COHESION_DRIFT_COST, markdown.DEFAULT_TARGET_SHARE)
    with cut_rule(0.25, 1.0):
        assert markdown.DEFAULT_TARGET_SHARE == 0.8
        inside = [(c.start_offset, c.end_offset) for c in chunker.chunk_note(text, "")]
    assert inside != before  # a larger target: fewer, longer pieces
    assert len(inside) < len(before)
    saved_after = (
        packing.COHESION_REACH,
        packing.COHESION_DRIFT_COST,
        markdown.DEFAULT_TARGET_SHARE,
    )
    assert saved_after == saved
    assert [(c.start_offset, c.end_offset) for c in chunker.chunk_note(text, "")] == before
