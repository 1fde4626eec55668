"""Reciprocal rank fusion: hand-computed scores, weights, tie-breaks, chunk-level fusion."""

from __future__ import annotations

import pytest

from api.retrieval.fusion import fuse_chunk_lists, reciprocal_rank_fusion
from tests.retrieval.builders import hit


def test_rrf_scores_match_hand_computation() -> None:
    fused = reciprocal_rank_fusion({"vector": ["a", "b", "c"], "keyword": ["c", "a"]})
    scores = {f.key: f.score for f in fused}
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["b"] == pytest.approx(1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert [f.key for f in fused] == ["a", "c", "b"]
    assert fused[0].ranks == {"vector": 1, "keyword": 2}
    assert fused[2].ranks == {"vector": 2}


def test_k_and_weights_change_the_arithmetic() -> None:
    fused = reciprocal_rank_fusion(
        {"vector": ["a", "b"], "keyword": ["b"]}, k=0, weights={"keyword": 2.0}
    )
    scores = {f.key: f.score for f in fused}
    assert scores == pytest.approx({"a": 1.0, "b": 0.5 + 2.0})
    assert [f.key for f in fused] == ["b", "a"]


def test_zero_weight_list_only_breaks_ties() -> None:
    fused = reciprocal_rank_fusion({"vector": ["a", "b"], "keyword": ["b"]}, weights={"keyword": 0})
    assert [f.key for f in fused] == ["a", "b"]
    assert fused[1].score == pytest.approx(1 / 62)


def test_single_list_keeps_its_order() -> None:
    keys = ["z", "y", "x", "w"]
    assert [f.key for f in reciprocal_rank_fusion({"vector": keys})] == keys


def test_duplicates_within_a_list_count_once_at_best_rank() -> None:
    fused = reciprocal_rank_fusion({"vector": ["a", "a", "b"]})
    assert {f.key: f.ranks["vector"] for f in fused} == {"a": 1, "b": 2}
    assert fused[0].score == pytest.approx(1 / 61)


def test_ties_are_deterministic() -> None:
    # Equal scores and equal best ranks: the item of the earlier list comes first, and the
    # result does not depend on insertion order of anything else.
    first = reciprocal_rank_fusion({"vector": ["b"], "keyword": ["a"]})
    assert [f.key for f in first] == ["b", "a"]
    second = reciprocal_rank_fusion({"keyword": ["a"], "vector": ["b"]})
    assert [f.key for f in second] == ["a", "b"]
    # Repeating the same call gives the same order (no set/dict-order dependence).
    lists = {"l1": ["x", "p", "y"], "l2": ["q", "y", "r", "s", "x"]}
    orders = {tuple(f.key for f in reciprocal_rank_fusion(lists, k=0)) for _ in range(5)}
    assert orders == {("x", "q", "y", "p", "r", "s")}


def test_equal_score_prefers_better_best_rank() -> None:
    # a: ranks 1 and 3 with k=0 → 1 + 1/3 ; b: ranks 2 and 2 in two lists + 3rd list rank 3
    # → 1/2 + 1/2 + 1/3: identical sums, b appears in more lists but a has the better rank.
    fused = reciprocal_rank_fusion(
        {"l1": ["a", "b"], "l2": ["c", "b", "a"], "l3": ["d", "e", "b"]}, k=0
    )
    scores = {f.key: f.score for f in fused}
    assert scores["a"] == pytest.approx(scores["b"])
    order = [f.key for f in fused]
    assert order.index("a") < order.index("b")


@pytest.mark.parametrize(
    "kwargs",
    [{"k": -1}, {"weights": {"vector": -0.5}}, {"weights": {"nope": 1.0}}],
)
def test_invalid_parameters_raise(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        reciprocal_rank_fusion({"vector": ["a"]}, **kwargs)


def test_empty_input_fuses_to_nothing() -> None:
    assert reciprocal_rank_fusion({}) == []
    assert reciprocal_rank_fusion({"vector": [], "keyword": []}) == []


def test_fuse_chunk_lists_records_ranks_and_raw_scores() -> None:
    a, b, c = hit("n1", 0, 0.0), hit("n1", 1, 0.0), hit("n2", 0, 0.0)
    fused = fuse_chunk_lists(
        {"vector": [(a, 0.91), (b, 0.80)], "keyword": [(c, 12.5), (a, 7.0)]}, limit=2
    )
    assert [h.chunk_id for h in fused] == [a.chunk_id, c.chunk_id]
    top = fused[0]
    assert top.score == pytest.approx(1 / 61 + 1 / 62)
    assert top.ranks == {"vector": 1, "keyword": 2}
    assert top.retriever_scores == {"vector": pytest.approx(0.91), "keyword": pytest.approx(7.0)}
    assert top.content_md == a.content_md and top.heading_path == a.heading_path
    assert fused[1].ranks == {"keyword": 1}
