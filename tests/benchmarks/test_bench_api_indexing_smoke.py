"""Smoke runs of the notes-API and indexing benchmarks on tiny inputs (so the scripts cannot
rot), against the session's embedded server, plus direct tests of their pure parts."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks import indexing as indexing_report
from benchmarks.indexing_edits import run_edit_mix
from benchmarks.indexing_latency import run_edit_latency, run_throughput, throughput_notes
from benchmarks.indexing_notes import (
    EDIT_MIX,
    Note,
    edit_cost,
    generate_note,
    new_section,
    reordered_sections,
    rewrite_paragraph,
    typo_fix,
)
from benchmarks.indexing_storage import chunk_docs, run_bytes, run_requests
from benchmarks.notes_api import Sizes, run_mode
from benchmarks.notes_api_load import FILTER_TAG, make_corpus
from benchmarks.notes_api_report import claims as notes_api_claims
from benchmarks.notes_api_report import mode_table
from benchmarks.sample_note import realistic_note
from benchmarks.service_harness import summarize

# -- pure parts ---------------------------------------------------------------------------


def test_summarize_percentiles_in_ms() -> None:
    s = summarize([i / 1000 for i in range(1, 101)])  # 1..100 ms
    assert s.n == 100
    assert s.p50 == pytest.approx(50.5)
    assert s.p95 == pytest.approx(95.05)
    assert s.p99 == pytest.approx(99.01)
    with pytest.raises(ValueError):
        summarize([])


def test_corpus_is_deterministic_sized_and_tagged() -> None:
    corpus = make_corpus(40, seed=3)
    assert corpus == make_corpus(40, seed=3)
    sizes = [len(n.content_md.encode()) / 1024 for n in corpus]
    assert min(sizes) > 0.5 and max(sizes) < 25
    assert max(sizes) > 4 * min(sizes), "sizes spread over the range"
    tagged = sum(FILTER_TAG in n.tags for n in corpus)
    assert 0 < tagged < len(corpus)
    assert len({n.title for n in corpus}) == len(corpus)


def _sections(note: Note) -> list[tuple[int, str, tuple[str, ...]]]:
    return [(s.level, s.title, tuple(s.blocks)) for s in note.sections]


def test_each_edit_changes_what_its_name_says() -> None:
    base = generate_note(20, seed=5)
    rng = random.Random(1)
    fixed, _ = typo_fix(base, rng)
    diff = [(a, b) for a, b in zip(_sections(base), _sections(fixed), strict=True) if a != b]
    assert len(diff) == 1 and "configuraiton" in str(diff[0][0])
    assert "configuraiton" not in fixed.render()
    with pytest.raises(ValueError):
        typo_fix(fixed, rng)

    added, _ = new_section(base, rng)
    assert len(added.sections) == len(base.sections) + 1
    new_ones = [s for s in _sections(added) if s not in _sections(base)]
    assert len(new_ones) == 1 and new_ones[0][0] == 2

    moved, _ = reordered_sections(base, rng)
    assert sorted(_sections(moved)) == sorted(_sections(base))
    assert _sections(moved) != _sections(base)

    note = base
    for name, edit in EDIT_MIX:  # the whole mix applies in sequence without error
        new, detail = edit(note, rng)
        assert new.render() != note.render() and detail, name
        note = new
    assert base.render() == generate_note(20, seed=5).render(), "edits never mutate their input"


def test_edit_cost_counts_each_unseen_hash_once() -> None:
    chunk = SimpleNamespace
    chunks = [
        chunk(content_hash="a", embedding_text="one two"),
        chunk(content_hash="b", embedding_text="three four five"),
        chunk(content_hash="b", embedding_text="three four five"),
        chunk(content_hash="c", embedding_text="six"),
    ]
    cost = edit_cost(chunks, {"a"}, lambda texts: [len(t.split()) for t in texts])
    assert (cost.chunks_total, cost.tokens_total) == (4, 9)
    assert (cost.chunks_new, cost.tokens_new) == (2, 4)
    assert cost.token_fraction == pytest.approx(4 / 9)


def test_rewrite_paragraph_replaces_exactly_one_prose_block() -> None:
    content = realistic_note(120)
    edited = rewrite_paragraph(content, 2, "REPLACED paragraph.")
    before, after = content.split("\n\n"), edited.split("\n\n")
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert len(changed) == 1 and changed[0][1] == "REPLACED paragraph."
    assert changed[0][0][:1].isalpha() and "```" not in changed[0][0]


def test_indexing_turns_claim_and_report_from_rounds() -> None:
    from benchmarks.indexing_turns import MODES, claims, report

    rounds = [
        {"mode": MODES[0], "bob": 2.0, "alice": 21.0, "chunks": 100},
        {"mode": MODES[1], "bob": 20.0, "alice": 20.0, "chunks": 100},
    ]
    (claim,) = claims(rounds)
    assert claim.passed and "behind 100 chunks of long notes: 2.0 s vs 20.0 s" in claim.result
    assert "(0.10×); the long notes took 1.05× as long" in claim.result
    assert "no hand-over (baseline)" in report(rounds, sections=10, head_start_s=1.0)


# -- the scripts, tiny, against the real app and the embedded server ------------------------


async def test_edit_mix_stats_equal_the_independent_count(make_settings: Any) -> None:
    rows = await run_edit_mix(make_settings(autonote_index_workers=0), [0], n_sections=8)
    assert [r.edit for r in rows] == [name for name, _ in EDIT_MIX]
    assert all(r.agrees for r in rows), [(r.edit, r.stats, r.expected) for r in rows]
    by_edit = {r.edit: r for r in rows}
    assert by_edit["deleted section"].stats["embedded"] == 0
    assert by_edit["reordered sections"].stats["embedded"] == 0
    assert 0 < by_edit["paragraph rewrite"].token_fraction < 0.5
    assert "Average saving over all 6 edits" in indexing_report.report_edits(rows)
    claim = indexing_report.claim_edits(rows)
    assert "over 6 edits of 6 kinds" in claim.result and "count on 6 of 6" in claim.result


async def test_edit_latency_and_full_baseline(make_settings: Any) -> None:
    result = await run_edit_latency(make_settings(), edits=2, fulls=1, lines=60)
    assert len(result.edit_s) == 2 and len(result.full_s) == 1
    assert all(n >= 1 for n in result.edit_embedded)
    assert result.full_embedded[0] == result.chunks > max(result.edit_embedded)
    # Search is wired into the app: the edited text must also come back from it.
    assert result.search.startswith("included"), result.search
    assert len(result.search_s) == 2
    assert all(s >= e for s, e in zip(result.search_s, result.edit_s, strict=True))
    assert "P50 ÷ edit P50" in indexing_report.report_latency(result)
    claim = indexing_report.claim_latency(result)
    assert claim.passed and "returned by search at P50" in claim.result


async def test_throughput_in_process_loops(make_settings: Any, tmp_path: Path) -> None:
    notes = throughput_notes(3)
    row = await run_throughput(make_settings(autonote_index_workers=0), "2 loops", notes, tmp_path)
    assert row.notes == 3 and row.chunks >= 3 and row.embedded == row.chunks
    assert row.seconds > 0 and row.tokens > 0
    claim = indexing_report.claim_throughput([row, row])
    assert claim.result.endswith("tokens/s; 2 loops: 1.00×") and claim.passed is None


async def test_openai_requests_batched_vs_one_per_chunk(
    make_settings: Any, openai_stub: Any
) -> None:
    settings = make_settings(
        embedding_provider="openai",
        openai_api_key="sk-test",
        openai_base_url=openai_stub.base_url,
        autonote_index_workers=0,
    )
    rows = await run_requests(settings, openai_stub, total_sections=40)
    got = {(r.scenario, r.path.split(":")[0].split(" ")[0]): r.requests for r in rows}
    assert got[("1 note × 40 sections", "reconciler")] == 1
    assert got[("2 notes × 20 sections", "reconciler")] == 2
    assert got[("2 notes × 20 sections", "embed()")] == 2
    assert got[("1 note × 40 sections", "original")] == 40
    assert all(r.chunks == 40 for r in rows)
    assert "requests / 1 000 chunks" in indexing_report.report_requests(rows)
    claim = indexing_report.claim_requests(rows)
    assert claim.passed and claim.result.startswith("25 per 1 000 chunks as 1 note × 40 sections")


def test_binary_vectors_are_smaller_than_doubles(mongo_url: str, db_name: str) -> None:
    from api.config import load_settings
    from api.providers import build_chunker, build_embedder

    local = load_settings(embedding_provider="local", openai_api_key=None)
    chunks = build_chunker(local, build_embedder(local, None)).chunk_note(realistic_note(40), "T")
    rows = run_bytes(mongo_url, db_name, chunks, dims_list=(8, 384))
    by = {(r.dims, r.encoding.split(" ")[0]): r for r in rows}
    assert by[(384, "binary")].vector_bytes == len("embedding") + 2 + 4 + 1 + 2 + 4 * 384
    assert by[(384, "array")].avg_obj_size > 2 * by[(384, "binary")].avg_obj_size
    for r in rows:
        assert r.count == len(chunks)
        assert r.avg_obj_size == pytest.approx(r.bson_len, abs=1)
    assert isinstance(chunk_docs(chunks[:1], 4, True)[0]["embedding"], bytes)
    claim = indexing_report.claim_bytes(rows)
    assert claim.passed and claim.result.startswith("8 d: ") and "; 384 d: " in claim.result
    from pymongo import MongoClient

    MongoClient(mongo_url).drop_database(db_name)


async def test_notes_api_mode_served_over_http(mongo_url: str, tmp_path: Path) -> None:
    sizes = Sizes(notes=6, baseline=4, gets=4, list_requests=2, patches=1, concurrency=2)
    result = await run_mode("chunking_disabled", mongo_url, make_corpus(6), sizes, tmp_path)
    assert result.notes_total == 6 and result.chunks == 0
    routes = {route for route, _ in result.phases}
    assert {
        "POST /v1/notes",
        "GET /v1/notes/{id}",
        "PATCH content (version +1)",
        "PATCH tags only",
        "GET /healthz",
        "PyMongo find_one",
    } <= routes
    assert {conc for _, conc in result.phases} == {1, 2}
    assert all(p.samples and min(p.samples) > 0 for p in result.phases.values())
    assert len(result.phases[("POST /v1/notes", 1)].samples) == 3
    assert len(result.phases[("PATCH tags only", 2)].samples) == 1
    assert "documents examined" in result.list_plan
    assert "P50 ÷ find_one" in mode_table(result)
    (claim,) = notes_api_claims({"chunking_disabled": result})
    assert claim.result.startswith("indexing off, one client: GET a note P50 ")
    assert "× its own PyMongo query)" in claim.result


async def test_indexing_fairness_rounds_and_report(mongo_url: str) -> None:
    from benchmarks.indexing_fairness import MODES, claims, report, run_round

    rounds = [await run_round(mongo_url, mode, backlog=8, bob_notes=2) for mode in MODES]
    assert [len(r["bob"]) for r in rounds] == [2, 2]
    assert all(0 < r["bob"][-1] <= r["drain"] for r in rounds)
    text = report(rounds, backlog=8, bob_notes=2)
    assert "users take turns (default)" in text and "1.00×" in text
    (claim,) = claims(rounds, backlog=8)
    assert claim.id == "indexing_fairness" and "behind 8 queued notes" in claim.result


async def test_search_note_text_reads_less_than_whole_notes() -> None:
    from benchmarks.investigations.search_note_text import MODES, measure, render

    result = await measure(notes=2, note_chars=40_000, rounds=2, concurrent=2)
    assert result[MODES[0]]["chars"] == 2 * 2 * 6000  # two windows per note
    assert result[MODES[1]]["chars"] >= 2 * 40_000
    assert "1.00×" in render(result, 2, 40_000, 2, 2)


async def test_migration_live_rounds_and_report(mongo_url: str) -> None:
    import argparse

    from benchmarks.migration_live import MODES, claims, report, run_round

    args = argparse.Namespace(backlog=12, edits=2, interval=0.2, rate=50.0, batch=6, rounds=1)
    rounds = [await run_round(mongo_url, mode, args) for mode in MODES]
    assert [len(r["edits"]) for r in rounds] == [2, 2, 2]
    # Each edit indexed after it was written (how soon is the benchmark's figure; the
    # round fails past its own 600 s wait).
    assert all(t > 0 for r in rounds for t in r["edits"])
    assert [r["backlog_indexed"] for r in rounds] == [0, 12, 12]
    assert rounds[1]["by_workers"] == 0  # reserved: the workers leave the backlog alone
    text = report(rounds, args)
    assert "no migration (baseline)" in text and "1.00×" in text and "0 of 12" in text
    (claim,) = claims(rounds, args.backlog)
    assert "the API's workers indexed 0 of 12 backlog notes" in claim.result
