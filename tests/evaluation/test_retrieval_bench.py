"""The pure parts of benchmarks/retrieval.py: the tuning rule that decides defaults, the
latency benchmark's replication, and the write-up (so the script cannot rot unnoticed)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np

from api.evaluation import parse_notes, parse_questions
from api.evaluation.harness import SearchConfig
from api.evaluation.metrics import Citation, RankedNote, aggregate, judge
from api.retrieval.service import RankingConfig
from api.retrieval.types import ChunkRecord
from benchmarks.retrieval import Results
from benchmarks.retrieval_latency import replicate
from benchmarks.retrieval_quality import split_run
from benchmarks.retrieval_tuning import MIN_GAIN, Trial, changed_knobs, pick
from benchmarks.retrieval_writeup import render

NOTE_MD = "# T\n## A\nalpha\n## B\nbeta\n"


def _trial(score: float, **ranking: object) -> Trial:
    """A trial whose objective is exactly `score` (Recall@3 = MRR@3 = score)."""
    metrics = replace(
        aggregate([], bootstrap=0), recall={1: score, 3: score, 5: score, 10: score}, mrr3=score
    )
    return Trial("t", SearchConfig(ranking=replace(RankingConfig(), **ranking)), metrics)


def test_pick_prefers_the_incumbent_within_noise() -> None:
    incumbent = _trial(0.80)
    slightly_better = _trial(0.80 + MIN_GAIN / 2, rrf_k=5.0)
    assert pick(incumbent, [slightly_better]) is incumbent


def test_pick_prefers_fewer_changed_knobs_among_near_equals() -> None:
    incumbent = _trial(0.70, rrf_k=60.0)
    one_knob = _trial(0.84, rrf_k=1.0)
    two_knobs = _trial(0.845, rrf_k=1.0, note_scorer="max")
    far_better = _trial(0.90, rrf_k=2.0, note_scorer="sum")
    assert changed_knobs(two_knobs.search, incumbent.search) == 2
    assert pick(incumbent, [two_knobs, one_knob]) is one_knob
    assert pick(incumbent, [two_knobs, one_knob, far_better]) is far_better


def test_replicate_copies_whole_notes_with_fresh_ids_and_jittered_unit_vectors() -> None:
    vec = np.zeros(4, dtype=np.float32)
    vec[0] = 1.0
    base = [
        ChunkRecord(
            chunk_id=f"c{i}",
            note_id="n1",
            author_id="u",
            note_version=3,
            chunk_index=i,
            heading_path=["T"],
            section_path="T",
            content_md=f"text {i}",
            start_offset=i * 10,
            end_offset=i * 10 + 6,
            embedding_text="T\n\ntext",
            vector=vec,
        )
        for i in range(3)
    ]
    notes = {"n1": {"title": "T", "content_md": "x" * 40, "tags": ["a"]}}
    author = "65a000000000000000000001"
    items, docs = replicate(base, notes, target=7, author=author, seed=1)
    assert len(items) == 3 == len(docs)  # whole notes: 9 chunks ≥ 7
    ids = {meta.note_id for meta, _, _ in items}
    assert len(ids) == 3 and "n1" not in ids
    assert {str(d["_id"]) for d in docs} == ids
    for meta, version, chunks in items:
        assert version == 1 and meta.author_id == author
        assert [c.content_md for c in chunks] == ["text 0", "text 1", "text 2"]
        assert all(c.note_id == meta.note_id and c.author_id == author for c in chunks)
        norms = [float(np.linalg.norm(c.vector)) for c in chunks]
        assert np.allclose(norms, 1.0, atol=1e-5)
        assert not np.array_equal(chunks[0].vector, vec)  # jittered
    assert all(d["status"] == "active" and d["indexed_version"] == 1 for d in docs)


def test_render_writes_every_table_from_results() -> None:
    notes = parse_notes(json.dumps({"id": "n1", "title": "T", "content_md": NOTE_MD, "tags": []}))
    rows = [
        {"id": f"q{i}", "question": "?", "type": t, "gold": [{"note_id": "n1", "headings": [h]}]}
        for i, (t, h) in enumerate([("fact", "A"), ("paraphrase", "B"), ("fact", "B")])
    ]
    questions = parse_questions("\n".join(json.dumps(r) for r in rows), notes)
    cite_a = RankedNote("n1", (Citation("n1", 9, 14, 1.0),))
    outcomes = [judge(q, [cite_a], notes) for q in questions]
    splits = {"dev": {"q0"}, "test": {"q1", "q2"}}
    row = split_run(outcomes, splits, "hybrid", chunks=2, mean_chunk_tokens=3.0)
    res = Results(splits=["dev", "test"], modes=[row], corpus="1 note")
    text = render(res)
    assert "### Search modes" in text
    assert "| hybrid | 0.000 | **0.000** |" in text  # test: both questions miss
    assert "| dev R@3 | dev MRR@3 |" in text and "| 1.000 | 1.000 |" in text  # dev: a hit
    assert "other datasets" in text
    assert datetime.now(UTC).strftime("%Y-%m-%d") in text
