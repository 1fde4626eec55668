"""Section-level metrics (hand-checked on tiny cases), the embedding cache, and the
evaluation harness end to end on the shipped example set (real embedded database, real
chunker, local model, reconciler, local index and retrieval service)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
from pymongo import MongoClient
from typer.testing import CliRunner

from api.chat.context import build_context
from api.cli.evaluate import evaluate_command, optimize_command
from api.evaluation import load_dataset, parse_notes, parse_questions
from api.evaluation.baselines import evaluate_note_level
from api.evaluation.chunk_size import best_size, sweep_chunk_sizes
from api.evaluation.embedding_cache import CachingEmbedder
from api.evaluation.harness import (
    EvalCorpus,
    SearchConfig,
    default_embedder,
    open_corpus,
    ranked_notes,
)
from api.evaluation.metrics import (
    Citation,
    RankedNote,
    aggregate,
    bootstrap_ci,
    distinct_citations,
    first_hit_rank,
    first_note_rank,
    gold_share,
    judge,
    mrr_at,
    order_citations,
    paired_difference,
    recall_at,
)
from api.retrieval.types import NoteResult, SectionMatch
from connectors.embeddings.base import EmbeddingBatch

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "api" / "evaluation" / "example"

# Offsets: "# T\n" 0-4 | "## A\n" 4-9 | body A "alpha one\n\nalpha two" 9-29 | "\n## B\n" |
# body B "beta" 35-39 | "\n## C\n" | body C "gamma" 45-50.
NOTE_MD = "# T\n## A\nalpha one\n\nalpha two\n## B\nbeta\n## C\ngamma\n"


def _corpus() -> dict[str, Any]:
    notes = parse_notes(
        json.dumps({"id": "n1", "title": "T", "content_md": NOTE_MD, "tags": []})
        + "\n"
        + json.dumps({"id": "n2", "title": "U", "content_md": "just text\n", "tags": []})
    )
    return notes


def _question(headings: list[str], qtype: str = "fact") -> Any:
    notes = _corpus()
    row = {
        "id": "q1",
        "question": "?",
        "type": qtype,
        "gold": [{"note_id": "n1", "headings": headings}],
    }
    (q,) = parse_questions(json.dumps(row), notes)
    return q


def test_the_fixture_offsets_are_what_the_comments_say() -> None:
    notes = _corpus()
    spans = {s.headings: s.span for s in notes["n1"].sections}
    assert spans == {("A",): (9, 29), ("B",): (35, 39), ("C",): (45, 50)}


# --- metrics ------------------------------------------------------------------------


def test_recall_and_mrr_on_hand_computed_ranks() -> None:
    ranks = [1, None, 3, 2, 5]
    assert recall_at(ranks, 1) == pytest.approx(1 / 5)
    assert recall_at(ranks, 3) == pytest.approx(3 / 5)
    assert recall_at(ranks, 5) == pytest.approx(4 / 5)
    assert mrr_at(ranks, 3) == pytest.approx((1 + 1 / 3 + 1 / 2) / 5)
    assert mrr_at(ranks, 10) == pytest.approx((1 + 1 / 3 + 1 / 2 + 1 / 5) / 5)
    assert recall_at([], 3) == 0.0 and mrr_at([], 3) == 0.0


def test_search_order_keeps_note_rank_and_citation_order_sorts_by_section_score() -> None:
    first = RankedNote("n1", (Citation("n1", 9, 20, 0.2), Citation("n1", 35, 39, 0.1)))
    second = RankedNote("n2", (Citation("n2", 0, 9, 0.3), Citation("n2", 0, 4, 0.2)))
    assert [c.score for c in order_citations([first, second], "search")] == [0.2, 0.1, 0.3, 0.2]
    chat = order_citations([first, second], "citation")
    # Ties (0.2) keep search order: n1's section before n2's.
    assert [(c.note_id, c.start) for c in chat] == [("n2", 0), ("n1", 9), ("n2", 0), ("n1", 35)]


def _section(start: int, end: int, score: float) -> SectionMatch:
    return SectionMatch(
        chunk_ids=[f"c{start}"],
        chunk_indexes=[start],
        heading_path=["T"],
        section_path="T",
        content_md="x" * (end - start),
        start_offset=start,
        end_offset=end,
        score=score,
    )


def test_citation_order_is_the_order_chat_numbers_its_references() -> None:
    when = datetime(2024, 1, 1, tzinfo=UTC)
    results = [
        NoteResult(
            note_id="a",
            title="A",
            tags=[],
            updated_at=when,
            score=0.9,
            matching_chunks=[_section(0, 10, 0.03), _section(20, 30, 0.01)],
        ),
        NoteResult(
            note_id="b",
            title="B",
            tags=[],
            updated_at=when,
            score=0.5,
            matching_chunks=[_section(5, 9, 0.02), _section(40, 50, 0.01)],
        ),
    ]
    _, refs = build_context(results, budget_tokens=10_000, count_tokens=len)
    ours = order_citations(ranked_notes(results, {}), "citation")
    assert [(c.note_id, c.start_offset, c.end_offset) for c in refs] == [
        (c.note_id, c.start, c.end) for c in ours
    ]
    assert [c.note_id for c in ours] == ["a", "b", "a", "b"]  # not ["a", "a", "b", "b"]


def test_distinct_citations_count_leaf_sections_not_chunks() -> None:
    notes = _corpus()
    cites = [
        Citation("n1", 9, 18),  # section A, first chunk
        Citation("n1", 9, 18),  # exact repeat
        Citation("n1", 20, 29),  # section A again (another chunk): nothing new
        Citation("n1", 20, 39),  # A and B: B is new → kept
        Citation("n1", 0, 3),  # the title line: no leaf section → kept (as a miss)
        Citation("n1", 45, 50),  # C
    ]
    kept = distinct_citations(cites, notes)
    assert [(c.start, c.end) for c in kept] == [(9, 18), (20, 39), (0, 3), (45, 50)]


def test_first_hit_and_note_ranks() -> None:
    q = _question(["B"])
    cites = [Citation("n2", 0, 9), Citation("n1", 9, 29), Citation("n1", 30, 36)]
    # (30, 36) overlaps B's body (35, 39) by one character: that is a hit.
    assert first_hit_rank(q.gold, cites) == 3
    assert first_hit_rank(q.gold, cites[:2]) is None
    assert first_hit_rank(q.gold, [Citation("n2", 35, 39)]) is None  # same span, other note
    # Strict: the citation must mostly BE the gold section. (30, 36) has 1 of 6 in B.
    assert first_hit_rank(q.gold, cites, min_share=0.5) is None
    whole = Citation("n1", 0, 50)  # contains B (4 of 50 characters): a hit, not strict
    assert first_hit_rank(q.gold, [whole, Citation("n1", 34, 40)], min_share=0.5) == 2
    assert gold_share(q.gold, whole) == pytest.approx(4 / 50)
    assert gold_share(q.gold, Citation("n2", 35, 39)) == 0.0
    assert first_note_rank(q.gold, ["n2", "n2", "n1"]) == 2  # distinct notes
    assert first_note_rank(q.gold, ["n2"]) is None


def test_judge_uses_distinct_sections_in_both_orders() -> None:
    notes = _corpus()
    q = _question(["C"])
    response = [
        RankedNote(
            "n1",
            (Citation("n1", 9, 18, 0.5), Citation("n1", 20, 29, 0.4), Citation("n1", 45, 50, 0.3)),
        ),
        RankedNote("n2", (Citation("n2", 0, 9, 0.45),)),
    ]
    out = judge(q, response, notes)
    # Citation order: A, n2, [A's second chunk dropped], C (3). Search: A, [A], C (2), n2.
    assert out.rank == 3
    assert out.strict_rank == 3  # C's citation is exactly section C
    assert out.search_rank == 2
    assert out.note_rank == 1
    assert out.top3_chars == 9 + 9 + 5
    assert [(c.note_id, c.start) for c in out.citations] == [("n1", 9), ("n2", 0), ("n1", 45)]


def test_aggregate_by_type_and_confidence_interval() -> None:
    notes = _corpus()
    hit = RankedNote("n1", (Citation("n1", 35, 39, 1.0),))
    miss = RankedNote("n2", (Citation("n2", 0, 9, 1.0),))
    outcomes = [
        judge(_question(["B"], "fact"), [hit], notes),
        judge(_question(["B"], "fact"), [miss], notes),
        judge(_question(["B"], "paraphrase"), [miss, hit], notes),
    ]
    m = aggregate(outcomes, bootstrap=500)
    assert m.questions == 3
    assert m.recall[1] == pytest.approx(1 / 3)
    assert m.recall[3] == pytest.approx(2 / 3)
    assert m.mrr3 == pytest.approx((1 + 0 + 0.5) / 3)
    assert m.note_recall[3] == pytest.approx(2 / 3)
    assert m.strict_recall[3] == m.recall[3]  # citations inside their sections
    assert m.recall3_by_type == {"fact": (2, 0.5), "paraphrase": (1, 1.0)}
    lo, hi = m.recall3_ci
    assert 0.0 <= lo <= m.recall[3] <= hi <= 1.0
    assert aggregate(outcomes, bootstrap=500).recall3_ci == m.recall3_ci  # seeded


def test_bootstrap_and_paired_difference() -> None:
    assert bootstrap_ci([1.0] * 10) == (1.0, 1.0)
    lo, hi = bootstrap_ci([0.0, 1.0] * 50)
    assert 0.35 < lo < 0.5 < hi < 0.65
    assert paired_difference([1.0, 0.0], [1.0, 0.0]) == (0.0, 0.0, 0.0)
    mean, lo, hi = paired_difference([1.0] * 40, [0.0] * 20 + [1.0] * 20)
    assert mean == pytest.approx(0.5) and 0 < lo <= 0.5 <= hi
    with pytest.raises(ValueError):
        paired_difference([1.0], [])


# --- embedding cache ------------------------------------------------------------------


class CountingEmbedder:
    """A deterministic fake model (external boundary): vector = hash of the text."""

    model = "fake"
    dimensions = 4
    max_input_tokens = 3

    class tokenizer:  # mimics an attribute holding a tokenizer
        @staticmethod
        def count(text: str) -> int:
            return len(text.split())

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], bool]] = []

    async def embed(self, texts: list[str], *, truncate: bool = False) -> EmbeddingBatch:
        self.calls.append((list(texts), truncate))
        rows = [np.random.default_rng(abs(hash((t, truncate)))).random(4) for t in texts]
        return EmbeddingBatch(np.asarray(rows, dtype=np.float32), tokens=len(texts), requests=1)

    async def aclose(self) -> None:
        return None


async def test_caching_embedder_embeds_each_text_once_and_round_trips(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    cache = CachingEmbedder(inner)
    first = await cache.embed(["a b", "c", "a b"])
    again = await cache.embed(["c", "a b", "d e f g"])
    assert inner.calls == [(["a b", "c"], False), (["d e f g"], False)]
    assert np.array_equal(first.vectors[0], again.vectors[1])
    assert np.array_equal(first.vectors[1], again.vectors[0])
    assert again.tokens == 1 + 1 + 2  # the miss as the model billed it, hits by tokenizer
    queried = await cache.embed(["a b"], truncate=True)  # another key: truncation differs
    assert len(inner.calls) == 3 and queried.vectors.shape == (1, 4)
    assert (cache.hits, cache.misses) == (3, 4)
    assert cache.model == "fake"  # attributes delegate to the model

    path = tmp_path / "cache.npz"
    cache.save(path)
    fresh = CachingEmbedder(CountingEmbedder())
    assert fresh.load(path) == 4
    reread = await fresh.embed(["a b", "d e f g"])
    assert fresh.inner.calls == []
    assert np.array_equal(reread.vectors[1], again.vectors[2])
    assert CachingEmbedder(CountingEmbedder()).load(tmp_path / "missing.npz") == 0


# --- the harness end to end ------------------------------------------------------------


@pytest.fixture(scope="module")
async def shared_embedder() -> AsyncIterator[CachingEmbedder]:
    embedder = default_embedder()
    yield embedder
    await embedder.aclose()


@pytest.fixture(scope="module")
async def example_corpus(
    mongo_url: str, shared_embedder: CachingEmbedder
) -> AsyncIterator[EvalCorpus]:
    dataset = load_dataset(EXAMPLE / "notes.jsonl", EXAMPLE / "questions.jsonl")
    async with open_corpus(
        dataset, mongo_url=mongo_url, embedder=shared_embedder, settings_overrides={}
    ) as corpus:
        yield corpus
    client: MongoClient = MongoClient(mongo_url)
    try:
        assert corpus.db.name not in client.list_database_names()  # thrown away
    finally:
        client.close()


async def test_corpus_is_loaded_through_the_real_pipeline(example_corpus: EvalCorpus) -> None:
    ds = example_corpus.dataset
    assert sorted(example_corpus.id_map.values()) == sorted(ds.notes)
    records = await example_corpus.chunk_records()
    assert len(records) == example_corpus.report.chunks > len(ds.notes)
    for r in records:  # every stored chunk is an exact slice of its dataset note
        note = ds.notes[example_corpus.id_map[r.note_id]]
        if r.chunk_type == "text":
            assert note.content_md[r.start_offset : r.end_offset] == r.content_md
        assert r.vector.shape == (example_corpus.embedder.dimensions,)
    statuses = await example_corpus.db.notes.distinct("index_status")
    assert statuses == ["indexed"]


async def test_hybrid_recall_on_the_example_set(example_corpus: EvalCorpus) -> None:
    runs = {
        mode: await example_corpus.evaluate(search=SearchConfig(mode=mode), label=mode)
        for mode in ("hybrid", "vector", "keyword")
    }
    for run in runs.values():
        assert run.metrics.questions == 32
        assert len(run.search_ms) == 32
    hybrid, keyword, vector = (runs[m].metrics for m in ("hybrid", "keyword", "vector"))
    assert hybrid.recall[3] > 0.5
    assert hybrid.recall[3] >= keyword.recall[3] - 0.07  # ≈ two questions of slack
    assert hybrid.recall[3] >= vector.recall[3] - 0.07
    assert 0 < hybrid.mrr3 <= hybrid.recall[3]
    assert hybrid.recall[1] <= hybrid.recall[3] <= hybrid.recall[5]
    # Rerunning gives the same answer (deterministic pipeline, cached query vectors).
    again = await example_corpus.evaluate(search=SearchConfig(mode="hybrid"))
    assert [o.rank for o in again.outcomes] == [o.rank for o in runs["hybrid"].outcomes]


async def test_note_level_baseline_cites_whole_notes(
    example_corpus: EvalCorpus, shared_embedder: CachingEmbedder
) -> None:
    run = await evaluate_note_level(example_corpus.dataset, shared_embedder)
    m = run.metrics
    assert m.questions == 32
    # A whole-note citation overlaps every gold section of its note: generous by design.
    assert m.recall[3] == m.note_recall[3]
    assert m.mean_top3_chars > 3 * 2000


async def test_sweep_skips_sizes_with_identical_chunks(
    mongo_url: str, example_corpus: EvalCorpus, shared_embedder: CachingEmbedder
) -> None:
    # Both sizes exceed what the local model reads: same chunks, indexed once. The default
    # size gives exactly the corpus above, so the metrics must match it exactly.
    results = await sweep_chunk_sizes(
        example_corpus.dataset, [800, 300], mongo_url=mongo_url, embedder=shared_embedder
    )
    assert [r.size for r in results] == [300, 800]
    assert results[0].chunks == example_corpus.report.chunks
    assert results[1].same_as == 300 and results[1].metrics == results[0].metrics
    assert best_size(results).size == 300  # a tie goes to the smaller size
    reference = await example_corpus.evaluate()
    assert results[0].metrics.recall == reference.metrics.recall


def test_commands_document_the_dataset_format() -> None:
    for command in (optimize_command, evaluate_command):
        app = typer.Typer()
        app.command()(command)
        result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "240"})
        assert result.exit_code == 0, result.output
        assert "benchmarks/data/retrieval/README.md" in result.output
        assert "--notes" in result.output and "--questions" in result.output
