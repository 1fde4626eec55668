"""Smoke runs of the benchmark scripts' core functions on small inputs (seconds), so the
scripts cannot rot, plus direct tests of the pure metric code they rely on."""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pytest

from benchmarks import chunk_quality, chunk_quality_report, common
from benchmarks.baseline_regex_chunker import BaselineRegexChunker
from benchmarks.chroma_eval import (
    Question,
    Span,
    evaluate,
    load_corpora,
    load_questions,
    score_question,
)
from benchmarks.sample_note import realistic_note
from benchmarks.structure_quality import (
    ChunkView,
    check_structure,
    locate_in_order,
    parse_document,
)

common.set_offline_env()
CHROMA = common.chroma_dir()
# The peer chunkers are benchmark-only dependencies (`.[bench]`, installed by `make bench`),
# kept out of `make test` so CI does not install four more libraries for three tests.
needs_peers = pytest.mark.skipif(
    any(
        importlib.util.find_spec(m) is None
        for m in ("langchain_text_splitters", "llama_index", "chonkie", "semantic_text_splitter")
    ),
    reason="benchmark peers not installed (pip install -e '.[bench]' or make bench)",
)

DOC = """# Title

Intro paragraph with words.

```python
x = 1
y = 2
```

| a | b |
|---|---|
| 1 | 2 |
| 3 | 4 |

## Empty heading
## Next

Tail text.
"""


def _words(text: str) -> int:
    return len(text.split())


# -- common -----------------------------------------------------------------------------


def test_update_section_creates_replaces_and_preserves(tmp_path: Path) -> None:
    report = tmp_path / "BENCHMARKS.md"
    common.update_section("one", "first body", path=report)
    common.update_section("two", "second body", path=report)
    common.update_section("one", "new body", path=report)
    text = report.read_text()
    assert text.startswith("# Benchmarks\n")
    assert "<!-- bench:one -->\nnew body\n<!-- /bench:one -->" in text
    assert "first body" not in text
    assert "<!-- bench:two -->\nsecond body\n<!-- /bench:two -->" in text
    assert text.index("bench:one") < text.index("bench:two")  # order kept


def test_update_section_goes_to_the_area_page_or_the_investigations_report() -> None:
    assert common.page_for("chunking") == common.DOCS_DIR / "chunking.md"
    assert common.page_for("tokenizer_backends") == common.INVESTIGATIONS_REPORT
    with pytest.raises(KeyError, match="no page for section 'nope'"):
        common.page_for("nope")


def test_update_claims_rewrites_only_the_rows_own_cells(tmp_path: Path) -> None:
    table = tmp_path / "BENCHMARKS.md"
    table.write_text(
        "| Claim | Target | Latest result | Pass/fail | Command | Date |\n"
        "|---|---|---|---|---|---|\n"
        "| A | ≤ 2 | <!-- claim:a -->old | **PASS** | `x` | 2020-01-01<!-- /claim:a --> |\n"
        "| B | — | <!-- claim:b -->kept | — | `y` | 2020-01-01<!-- /claim:b --> |\n"
    )
    claims = [common.Claim("a", "1.5 | 2", False, "(titled)"), common.Claim("z", "r")]
    missing = common.update_claims(claims, "python -m x", path=table, day="2026-01-02")
    assert missing == ["z"]
    text = table.read_text()
    row = "| A | ≤ 2 | <!-- claim:a -->1.5 \\| 2 | **FAIL** (titled) | `python -m x` | 2026-01-02"
    assert row + "<!-- /claim:a --> |\n" in text
    assert "| B | — | <!-- claim:b -->kept | — | `y` | 2020-01-01<!-- /claim:b --> |\n" in text
    assert common.Claim("c", "r").verdict == "—" and common.Claim("c", "r", True).verdict == (
        "**PASS**"
    )


def test_benchmarks_md_opens_with_the_claims_make_bench_reruns() -> None:
    """Every row of the claims table is built by a script (or test campaign) that
    `make bench` runs, and every row such a script builds is in the table."""
    import re

    from benchmarks import run_all

    root = common.REPO_ROOT
    table = common.BENCHMARKS_MD.read_text(encoding="utf-8")
    first_row = next(line for line in table.splitlines() if line.startswith("|"))
    assert first_row == "| Claim | Target | Latest result | Pass/fail | Command | Date |"
    rows = re.findall(r"^\| .*<!-- claim:(\w+) -->.*<!-- /claim:\1 --> \|$", table, re.M)
    assert len(rows) == len(set(rows)) == table.count("<!-- claim:")
    builders = [*root.glob("benchmarks/*.py"), root / "tests/fuzz/campaign.py"]
    built: set[str] = set()
    for path in [*builders, root / "tests/faults/report.py"]:
        built |= set(re.findall(r'Claim\(\s*"(\w+)"', path.read_text(encoding="utf-8")))
    assert set(rows) == built
    commands = [" ".join(args) for args, _ in run_all.CLAIMS.values()]
    writers = [*builders, root / "tests/faults/support.py"]
    for path in writers:
        if path.name == "common.py" or "update_claims(" not in path.read_text(encoding="utf-8"):
            continue
        rel = path.relative_to(root)
        run = "tests/faults" if "faults" in rel.parts else ".".join(rel.with_suffix("").parts)
        assert any(f" {run}" in f" {c}" for c in commands), rel
    assert not any("investigations" in c for c in commands)


def test_every_relative_link_of_the_benchmark_pages_resolves() -> None:
    import re

    pages = [common.BENCHMARKS_MD, *sorted(common.DOCS_DIR.glob("*.md"))]
    assert len(pages) > 1
    broken = [
        f"{page.name}: {target}"
        for page in pages
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8"))
        if not re.match(r"[a-z]+:|#", target) and not (page.parent / target.split("#")[0]).exists()
    ]
    assert broken == []


def test_time_interleaved_runs_each_competitor_repeats_plus_warmup() -> None:
    calls = {"a": 0, "b": 0}

    def bump(name: str) -> None:
        calls[name] += 1

    timings = common.time_interleaved({"a": lambda: bump("a"), "b": lambda: bump("b")}, 4)
    assert calls == {"a": 5, "b": 5}
    assert all(len(t.samples) == 4 and t.median >= 0 for t in timings.values())


def test_ratio_pairs_samples_by_round() -> None:
    # Round 2 ran while the machine was slow for both: pairing ignores it, medians do not.
    ours = common.Timing("ours", [2.0, 10.0, 3.0])
    floor = common.Timing("floor", [1.0, 10.0, 1.0])
    assert ours.ratio_to(floor) == 2.0 and ours.median / floor.median == 3.0
    with pytest.raises(ValueError):
        ours.ratio_to(common.Timing("short", [1.0]))


def test_no_network_blocks_and_records() -> None:
    import socket

    with common.no_network() as attempts, pytest.raises(OSError):
        socket.create_connection(("example.org", 80), timeout=1)
    assert attempts and "example.org" in attempts[0]


# -- baseline and structure checks ------------------------------------------------------


def test_baseline_is_the_original_algorithm_with_its_defects() -> None:
    # 590-char paragraphs ≈ 147 "tokens": each fills a chunk alone, so the tail is alone.
    note = "## Intro\nSome text.\n\n## Big\n\n" + "\n\n".join(["p" * 590] * 4)
    note += "\n\nthe end of the section"
    chunks = BaselineRegexChunker(max_chunk_tokens=150).chunk_note(note, "T")
    # Injected title makes a heading-only first chunk; len//4 estimate.
    assert chunks[0].content_md == "# T\n\n"
    assert all(c.token_count == len(c.content_md) // 4 for c in chunks)
    # The short last paragraph ("end") of the oversized section is dropped.
    assert not any("the end" in c.content_md for c in chunks)
    assert [c.chunk_type for c in chunks].count("paragraph") == 4


def test_structure_metrics_detect_each_defect() -> None:
    doc = parse_document(DOC)
    fence = DOC.index("```python")
    table = DOC.index("| a |")
    row3 = DOC.index("| 3 |")
    good = [
        ChunkView(DOC[: DOC.index("## Empty")], 0, DOC.index("## Empty")),
        ChunkView(DOC[DOC.index("## Next") :], DOC.index("## Next"), len(DOC)),
    ]
    ok = check_structure(doc, good, limit=100, count_tokens=_words)
    assert (ok.split_fences, ok.split_tables, ok.heading_only, ok.dropped_chars) == (0, 0, 0, 0)

    bad = [
        ChunkView(DOC[: fence + 15]),  # splits the fence after "x = 1"
        ChunkView(DOC[fence + 15 : row3]),
        ChunkView(DOC[row3 : DOC.index("## Next")]),  # table rows without header
        ChunkView("## Next\n"),  # heading only
        # "Tail text." dropped entirely
    ]
    stats = check_structure(doc, bad, limit=3, count_tokens=_words)
    assert stats.split_fences == 1
    assert stats.split_tables == 1
    assert stats.heading_only == 1
    assert stats.dropped_chars == len("Tailtext.")
    assert stats.over_limit == 3 and stats.max_tokens > 3
    assert stats.wrong_counts is None  # no chunk reported a count
    assert table < row3

    first = DOC[: DOC.index("## Empty")]
    counted = [
        ChunkView(first, 0, len(first), reported_tokens=_words(first)),
        ChunkView(DOC[DOC.index("## Next") :], reported_tokens=_words(DOC) + 1),  # off by one
    ]
    assert check_structure(doc, counted, limit=100, count_tokens=_words).wrong_counts == 1


def test_locate_in_order_ignores_whitespace_and_counts_synthetic_text() -> None:
    doc = parse_document(DOC)
    ranges, unlocated = locate_in_order(
        doc, ["#  Injected\nIntro paragraph\n  with words.", "Tail    text."]
    )
    assert unlocated == len("#Injected")
    assert doc.ns[ranges[0][0][0] : ranges[0][0][1]] == "Introparagraphwithwords."
    assert doc.ns[ranges[1][0][0] : ranges[1][0][1]] == "Tailtext."


def test_realistic_note_is_deterministic_and_exact_length() -> None:
    note = realistic_note(1000)
    assert note == realistic_note(1000)
    assert note.count("\n") == 1000
    parsed = parse_document(note)
    assert len(parsed.fences) >= 5 and len(parsed.tables) >= 1


# -- chunking benchmark -----------------------------------------------------------------


@needs_peers
def test_chunking_benchmark_smoke() -> None:
    from benchmarks.chunking import OURS, benchmark_size, claims, render, scaling

    docs = {"small note": realistic_note(60, seed=7)}
    results = benchmark_size(docs, 200, repeats=1)
    res = results[0]
    assert {"ours", "floor (parse+encode)", "original regex"} <= set(res.timings)
    assert len(res.timings) == 9 and len(res.structure) == 6
    assert "chonkie + exact counts" in res.timings
    assert "ours, nearest-boundary cuts" in res.timings
    ours = res.structure[OURS]
    assert ours.chunks > 3
    assert (
        ours.split_fences,
        ours.split_tables,
        ours.heading_only,
        ours.dropped_chars,
        ours.over_limit,
        ours.over_input_limit,
        ours.wrong_counts,
    ) == (0, 0, 0, 0, 0, 0, 0)
    assert res.structure["langchain md-header+recursive"].wrong_counts is None  # none reported
    assert res.structure["original regex"].wrong_counts  # len // 4 is an estimate
    rows = scaling(docs, max_tokens=200, repeats=1, factors=(1, 2))
    assert [r[1] for r in rows] == ["×1", "×2"]
    text = render({200: results}, rows, [])
    assert "ours / floor" in text and "Structure quality at 200" in text
    assert "- ours, nearest-boundary cuts (the cut-rule ablation" in text
    assert "‡ chonkie + exact counts" in text and "ours / chonkie + exact counts ‡" in text
    assert "faster than every token-sizing peer" not in text  # information, not a target
    speed, structure = claims({200: results})
    assert speed.id == "chunking_speed" and "at 200 tokens (1 documents)" in speed.result
    assert structure.passed and "0 wrong token counts" in structure.result
    assert all(t.cpu_samples and len(t.cpu_samples) == len(t.samples) for t in res.timings.values())
    assert "Linear scaling" in text


# -- chunk quality ----------------------------------------------------------------------


def test_score_question_matches_report_definitions() -> None:
    refs = [(10, 20), (30, 40)]
    retrieved = [(0, 15, True), (12, 35, True), (100, 150, False)]
    recall, precision, iou = score_question(retrieved, refs)
    # intersections: [10,15) ∪ [12,20) ∪ [30,35) = 10 + 5 = 15 chars of 20
    assert recall == pytest.approx(15 / 20)
    assert precision == pytest.approx(15 / (15 + 23 + 50))  # Σ|retrieved| incl. other corpus
    assert iou == pytest.approx(15 / (15 + 23 + 50 + 5))  # + unretrieved [35,40)


def test_evaluate_scopes_differ_only_by_foreign_candidates() -> None:
    questions = [Question("q", "a", ((0, 10),))]
    spans = {"a": [Span(0, 10, "x"), Span(10, 20, "y")], "b": [Span(0, 50, "z")]}
    vecs = {"a": np.array([[1.0, 0.0], [0.0, 1.0]]), "b": np.array([[0.8, 0.6]])}
    q = np.array([[1.0, 0.0]])
    own = evaluate(questions, q, spans, vecs, k=2, scope="corpus")
    allc = evaluate(questions, q, spans, vecs, k=2, scope="global")
    assert own.recall == allc.recall == 1.0
    assert own.precision == pytest.approx(10 / 20)
    assert allc.precision == pytest.approx(10 / 60)  # the foreign chunk was 2nd best


@needs_peers
def test_chunk_quality_smoke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from api.tokenizer.encoders import tiktoken_tokenizer
    from connectors.embeddings.local import LocalEmbedder

    monkeypatch.setattr(chunk_quality, "DATA_DIR", tmp_path)
    data = CHROMA
    full = load_corpora(data / "corpora")
    corpus = full["state_of_the_union"][:3000]
    corpora = {"state_of_the_union": corpus}
    questions = [
        q
        for q in load_questions(data / "questions_df.csv", full)
        if q.corpus_id == "state_of_the_union" and max(e for _, e in q.references) <= 3000
    ]
    assert len(questions) >= 3
    embedder = LocalEmbedder()
    qvecs = chunk_quality.embed_cached(embedder, "q", [q.text for q in questions], True)
    count = tiktoken_tokenizer("cl100k_base").count
    specs = [
        s
        for s in chunk_quality.default_specs(embedder)
        if s.label in (chunk_quality_report.OURS, chunk_quality_report.BASELINE)
    ]
    results = [
        chunk_quality.evaluate_chunker(s, corpora, questions, qvecs, embedder, count) for s in specs
    ]
    for res in results:
        assert 0.0 <= res.corpus.iou <= res.corpus.recall <= 1.0
        assert res.sizes["chunks"] >= 3
    ours = results[0]
    assert ours.sizes["over_model_limit"] == 0 and ours.sizes["p90_tokens"] <= 200
    assert len(list(tmp_path.glob("emb-*.npy"))) == 3  # questions + 2 chunkers cached
    text = chunk_quality.render(results, len(questions), 5, [])
    assert "Acceptance (own-corpus retrieval)" in text and "75.7" in text


@needs_peers
def test_peer_span_makers_return_exact_in_order_slices() -> None:
    corpus = load_corpora(CHROMA / "corpora")["chatlogs"][:8000]
    fixed = chunk_quality.fixed_token_spans(200)("chatlogs", corpus)
    assert fixed[0].start == 0 and fixed[-1].end == len(corpus)
    assert all(a.end == b.start for a, b in itertools.pairwise(fixed))
    assert all(s.embed_text == corpus[s.start : s.end] for s in fixed)
    recursive = chunk_quality.recursive_token_spans(200)("chatlogs", corpus)
    assert all(s.embed_text == corpus[s.start : s.end] for s in recursive)
    assert all(a.end <= b.start for a, b in itertools.pairwise(recursive))


def test_tokenizer_backends_wrapper_chunks_like_the_default_tokenizer() -> None:
    """The benchmark's stand-in tokenizer (another encoder behind the cl100k interface) must
    give exactly the default chunks, or its timings would compare different work. Driven
    here by tiktoken's own encoder, the backends themselves being optional."""
    from api.chunking import MarkdownChunker
    from benchmarks.chunking_peers import cl100k_encoding
    from benchmarks.investigations.tokenizer_backends import _BackendTokenizer, render

    note = realistic_note(200, seed=7)
    calls: list[int] = []

    def encode(text: str) -> list[int]:
        calls.append(len(text))
        return cl100k_encoding().encode_ordinary(text)

    wrapped = MarkdownChunker(max_chunk_tokens=120, tokenizer=_BackendTokenizer(encode))
    default = MarkdownChunker(max_chunk_tokens=120)
    got = [c.to_dict() for c in wrapped.chunk_note(note, "T")]
    assert got == [c.to_dict() for c in default.chunk_note(note, "T")]
    assert len(got) > 3
    assert max(calls) == len(note)  # the whole-note pass went through the backend
    text = render(["document", "ids identical"], [["note", "yes"]], ["rs-bpe"], "commit x")
    assert "| note | yes |" in text and "Not installed, not measured: rs-bpe." in text


def test_tokenizer_backends_refuses_to_overwrite_without_the_backends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from benchmarks.investigations import tokenizer_backends

    monkeypatch.setattr(tokenizer_backends, "load_backends", lambda: ({}, ["rs-bpe"]))
    with pytest.raises(SystemExit, match="not installed: rs-bpe"):
        tokenizer_backends.main([])


def test_chunking_hostile_smoke() -> None:
    """Two shapes at 20 KB, each in its child process; the report has both tokenizers."""
    from benchmarks import chunking_hostile

    shapes = [chunking_hostile.BASELINE, "backticks"]
    results = chunking_hostile.measure(20_000, shapes)
    assert set(results) == set(itertools.product(shapes, chunking_hostile.TOKENIZERS))
    assert all(r["chunks"] > 0 and r["seconds"] > 0 for r in results.values())
    report = chunking_hostile.render(results, 20_000, "test")
    assert "| backticks | 0.02 |" in report and "minilm: s ÷ baseline" in report
    (claim,) = chunking_hostile.claims(results, 20_000)
    assert claim.result.startswith("0.02 MB notes of 1 hostile shapes: slowest ")
    assert "MB peak growth (minilm)" in claim.result and claim.passed is None


def test_pasted_images_smoke() -> None:
    """cl100k only (the MiniLM baseline embeds ~1 500 base64 chunks: minutes)."""
    from benchmarks import pasted_images

    notes = ["table and list of 8 KB `<img>` tags", "no images (1000-line note)"]
    rows = pasted_images.measure(1, notes, ("cl100k",))
    (images, plain) = rows
    assert images[3] > 100 and images[4] <= 3 and images[-1] == "no"  # chunks, same chunks
    assert plain[3] == plain[4] and plain[-1] == "yes"
    report = pasted_images.render(rows, "test")
    assert "| no images (1000-line note) | cl100k |" in report
    (claim,) = pasted_images.claims(rows)
    assert claim.passed and claim.result.endswith("; a note without images: same chunks")


def test_search_deepening_smoke() -> None:
    """A 90-section crowding note and 3 others, one round: deepening returns all 4 notes
    where one round returned the crowding note alone, and the plain queries match as
    before (the real pipeline: embedded server, local model)."""
    from benchmarks.investigations import search_deepening

    res = asyncio.run(search_deepening.measure(90, 3, 1, 10))
    for mode in ("keyword", "hybrid"):
        assert res["notes"][(mode, "crowded", "deepening")] == 4
        assert res["notes"][(mode, "crowded", "one round")] == 1
        plain = res["notes"][(mode, "plain", "deepening")]
        assert plain == res["notes"][(mode, "plain", "one round")]
    report = search_deepening.render(res, 90, 3, 10)
    assert "| hybrid | crowded | 4.0 | 1.0 |" in report


def test_search_catch_up_smoke() -> None:
    """10 notes indexed while their author searches, catch-up on and off alternating, and
    the poll over 1 000 note documents with and without the `indexed_at` index (the real
    app: embedded server, local model). The index returns the same rows."""
    import argparse

    from benchmarks import search_catch_up

    args = argparse.Namespace(notes=10, rows=1000, authors=10, repeats=2)
    latency, follow = asyncio.run(search_catch_up.measure(args))
    assert latency["samples"]["on"] and latency["samples"]["off"]
    assert latency["waited_commits"] >= latency["waited_searches"]
    assert [f["phase"] for f in follow] == ["with", "without", "with, again"]
    assert len({f["poll_rows"] for f in follow}) == 1
    report = search_catch_up.render(latency, follow, 1000, 10)
    assert "| on ÷ off |" in report and "| without ÷ with (mean of both) |" in report
    (claim,) = search_catch_up.claims(latency, follow, 1000)
    assert "catch-up on ÷ off: P50 " in claim.result and "the poll over 1000 notes" in claim.result


# -- retrieval claim rows ---------------------------------------------------------------


def _metrics(recall3: float, mrr3: float, note1: float) -> object:
    from api.evaluation.metrics import Metrics

    recall = {1: mrr3, 3: recall3, 5: recall3, 10: recall3}
    return Metrics(
        questions=10,
        recall=recall,
        mrr3=mrr3,
        mrr10=mrr3,
        search_recall=recall,
        search_mrr3=mrr3,
        strict_recall=recall,
        strict_mrr3=mrr3,
        note_recall={1: note1, 3: note1, 5: note1, 10: note1},
        note_mrr3=note1,
        recall3_ci=(recall3 - 0.05, recall3 + 0.05),
        mrr3_ci=(mrr3 - 0.05, mrr3 + 0.05),
        mean_top3_chars=100.0,
        recall3_by_type={},
    )


def test_retrieval_claims_compare_with_note_level_embeddings_and_the_latency_target() -> None:
    from dataclasses import replace

    from benchmarks.retrieval import Results
    from benchmarks.retrieval_latency import LatencyResult
    from benchmarks.retrieval_quality import SplitMetrics
    from benchmarks.retrieval_writeup import claims
    from benchmarks.service_harness import LatencySummary

    ours = SplitMetrics("hybrid", {"test": _metrics(0.87, 0.79, 0.89)})
    note_level = SplitMetrics("note-level embedding (truncated)", {"test": _metrics(0.5, 0.5, 0.5)})
    fast = LatencySummary(10, 20.0, 30.0, 40.0, 22.0)
    lat = LatencyResult(1000, 90, fast, fast, replace(fast, p95=33.0), *[fast] * 7,
                        5.0, 1 << 20, 1 << 20, 0.1, 1.0)  # fmt: skip
    res = Results(splits=["dev", "test"], modes=[ours], baselines=[note_level], latency=[lat])
    quality, latency = claims(res)
    assert quality.id == "retrieval_heldout" and quality.passed
    assert "Recall@3 0.870 (95 % CI 0.82–0.92), MRR@3 0.790 (95 % CI 0.74–0.84)" in (quality.result)
    assert quality.result.endswith(": +74 % / +58 % (note Recall@1 +78 %)")
    assert latency.passed and latency.result == (
        "search P95 30.0 ms at 1,000 chunks (one user, local backend); serial search "
        "(baseline) P95 1.10× that"
    )
    res.baselines = [
        SplitMetrics("note-level embedding (truncated)", {"test": _metrics(0.8, 0.7, 0.6)})
    ]
    assert not claims(res)[0].passed  # +9 % is short of +40 %


def test_fault_and_fuzz_claim_rows() -> None:
    from tests.faults.report import faults_claims
    from tests.fuzz.campaign import Row
    from tests.fuzz.campaign import claims as fuzz_claims

    def run(scenario: str, **figures: int) -> dict[str, object]:
        return {"scenario": scenario, "figures": figures}

    results = [
        run("a_api_sigkill", writes_acknowledged=60, acknowledged_lost=0, kills=1),
        run("b_db_sigkill", writes_acknowledged=40, acknowledged_lost=0, outages=2),
        run("c_embedding_down"),
        run("d_disk_full_real", writes_acknowledged=70, acknowledged_lost_after_restart=1),
    ]
    kill, disk = faults_claims(results)
    assert kill.passed and kill.result == (
        "0 of 100 acknowledged writes lost in 2 scenarios (the API killed 1 times, the "
        "database 2 times)"
    )
    assert not disk.passed and disk.result.startswith("1 of 70 acknowledged writes lost")
    (fuzz,) = fuzz_claims([Row("a", 10, 0, "", 1.0), Row("atheris", 0, 0, "not installed", 0)])
    assert fuzz.passed and fuzz.result == "10 cases (2 targets), 0 crashes; not run: atheris"
    assert not fuzz_claims([Row("a", 10, 1, "", 1.0)])[0].passed
