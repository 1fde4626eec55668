"""Calibrated relevance (pure): features of a section's evidence, the fitted models, and
what search and chat do with it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from api.chat.context import relevant_or_nothing
from api.config import LOCAL_EMBEDDING_MODEL
from api.retrieval.relevance import (
    FEATURES,
    KEYWORD_MODEL,
    MODELS,
    RelevanceModel,
    coverage,
    model_for,
    query_evidence,
    section_features,
    usable_model,
    with_relevance,
)
from api.retrieval.types import ChunkHit, NoteResult, SectionMatch


def _hit(chunk_id: str, **scores: float) -> ChunkHit:
    return ChunkHit(
        chunk_id=chunk_id,
        note_id="n",
        author_id="a",
        note_version=1,
        chunk_index=0,
        heading_path=[],
        section_path="",
        content_md="",
        start_offset=0,
        end_offset=1,
        score=0.5,
        retriever_scores=scores,
        ranks={name: 1 for name in scores},
    )


def _section(text: str, relevance: float | None = None, **scores: float) -> SectionMatch:
    return SectionMatch(
        chunk_ids=["c"],
        chunk_indexes=[0],
        heading_path=["Backups"],
        section_path="Backups",
        content_md=text,
        start_offset=0,
        end_offset=len(text),
        score=0.5,
        retriever_scores=scores,
        ranks={name: 2 for name in scores},
        relevance=relevance,
    )


def _note(*sections: SectionMatch) -> NoteResult:
    return NoteResult(
        note_id="n",
        title="Ops runbook",
        tags=[],
        updated_at=datetime(2024, 1, 1, tzinfo=UTC),
        score=0.5,
        matching_chunks=list(sections),
    )


def test_coverage_counts_query_terms_in_the_text_case_and_plural_folded() -> None:
    assert coverage(["nightly", "backups", "restore"], "The Nightly backup.") == pytest.approx(
        2 / 3
    )
    assert coverage(["東 京"], "東京の天気") == 1.0
    assert coverage([], "anything") == 0.0


def test_features_of_a_section_missing_from_the_vector_list_use_its_worst_cosine() -> None:
    ev = query_evidence(
        "nightly backup", [_hit("a", vector=0.8, keyword=4.0), _hit("b", vector=0.3)]
    )
    features = section_features(_section("The nightly backup.", keyword=2.0), "Ops", ev)
    assert set(features) <= set(FEATURES)
    assert features["cosine"] == pytest.approx(0.3)  # not in the vector list: its floor
    assert features["cosine_gap"] == pytest.approx(0.5)
    assert features["bm25_share"] == pytest.approx(0.5)
    assert features["coverage"] == 1.0
    assert features["rank_prior"] == pytest.approx(0.5)


def test_atlas_vector_scores_are_turned_back_into_cosines() -> None:
    ev = query_evidence("x", [_hit("a", vector=0.9)], cosine_from_score=False)
    features = section_features(_section("x", vector=0.9), "T", ev)
    assert features["cosine"] == pytest.approx(0.8)


def test_probabilities_are_in_the_unit_interval_and_grow_with_the_evidence() -> None:
    model = model_for(LOCAL_EMBEDDING_MODEL)
    assert model is MODELS[LOCAL_EMBEDDING_MODEL]
    weak = {"cosine": 0.1, "cosine_gap": 0.5, "coverage": 0.0, "rank_prior": 0.05}
    strong = {
        "cosine": 0.7,
        "cosine_gap": 0.0,
        "bm25": 2.5,
        "bm25_share": 1.0,
        "coverage": 1.0,
        "rank_prior": 1.0,
    }
    assert 0.0 <= model.probability(weak) < model.probability(strong) <= 1.0
    extreme = RelevanceModel("x", 1e6, {})
    assert extreme.probability({}) == pytest.approx(1.0)


def test_other_embedders_and_keyword_only_queries_use_the_keyword_model() -> None:
    assert model_for("text-embedding-3-small") is KEYWORD_MODEL
    assert "cosine" not in KEYWORD_MODEL.weights
    no_vectors = query_evidence("x", [_hit("a", keyword=1.0)])
    assert usable_model(model_for(LOCAL_EMBEDDING_MODEL), no_vectors) is KEYWORD_MODEL


def test_every_section_and_note_gets_a_relevance() -> None:
    ev = query_evidence("nightly backup", [_hit("a", vector=0.7, keyword=3.0)])
    on_topic = _section("The nightly backup runs at 02:00.", vector=0.7, keyword=3.0)
    off_topic = _section("Lunch menu.", vector=0.1)
    [note] = with_relevance([_note(on_topic, off_topic)], ev, MODELS[LOCAL_EMBEDDING_MODEL])
    first, second = note.matching_chunks
    assert first.relevance is not None and second.relevance is not None
    assert first.relevance > second.relevance
    assert note.relevance == first.relevance


def test_chat_cites_nothing_when_no_section_is_relevant_enough() -> None:
    results = [_note(_section("a", 0.9), _section("b", 0.1)), _note(_section("c", 0.05))]
    assert relevant_or_nothing(results, 0.2) == results
    assert relevant_or_nothing(results, 0.95) == []
    unknown = [_note(_section("d", None))]  # the note-level fallback has no estimate
    assert relevant_or_nothing(unknown, 0.5) == unknown
