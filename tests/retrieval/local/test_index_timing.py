"""Timing of the local index at 100 000 chunks × 384 dimensions for ONE author.

Printed, not asserted (timings on shared cores are noisy). The target is vector search
P95 < 20 ms at this size; the figures say where this machine stands.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

import numpy as np
import pytest

from api.retrieval.local.index import LocalIndex, ScoredChunks
from api.retrieval.types import ChunkRecord, NoteMeta, SearchFilters

N_CHUNKS = int(os.environ.get("AUTONOTE_TIMING_CHUNKS", "100000"))
DIM = 384
CHUNKS_PER_NOTE = 10
WORDS_PER_CHUNK = 40
QUERIES = 40
LOAD_BATCH = 500  # notes per replace_notes call, as a start-up load would do


def _vocabulary(rng: np.random.Generator, size: int = 6000) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zi", "pa", "qu", "bre", "sto"]
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables, size=int(rng.integers(2, 5)))))
    return sorted(words)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _percentiles(samples: list[float]) -> str:
    ms = np.array(samples) * 1e3
    return f"P50 {np.percentile(ms, 50):6.2f} ms  P95 {np.percentile(ms, 95):6.2f} ms"


def _time(fn, args_list) -> list[float]:  # type: ignore[no-untyped-def]
    fn(*args_list[0])  # warm-up
    samples = []
    for args in args_list:
        start = time.perf_counter()
        fn(*args)
        samples.append(time.perf_counter() - start)
    return samples


@pytest.mark.slow  # a benchmark (prints figures, ~15 s and ~350 MiB): `make test-slow`
def test_timing_100k_chunks_one_author(capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    vocab = _vocabulary(rng)
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.05
    weights /= weights.sum()
    words = np.array(vocab)[rng.choice(len(vocab), size=(N_CHUNKS, WORDS_PER_CHUNK), p=weights)]
    vectors = rng.standard_normal((N_CHUNKS, DIM), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    index = LocalIndex(DIM)
    updated = datetime(2024, 1, 1, tzinfo=UTC)
    rss_before = _rss_bytes()
    start = time.perf_counter()
    batch: list[tuple[NoteMeta, int, list[ChunkRecord]]] = []
    for n in range(N_CHUNKS // CHUNKS_PER_NOTE):
        meta = NoteMeta(
            note_id=f"note{n}",
            author_id="author",
            title=f"Note {n}",
            tags=["even" if n % 2 == 0 else "odd", f"t{n % 50}"],
            updated_at=updated,
        )
        chunks = []
        for i in range(CHUNKS_PER_NOTE):
            row = n * CHUNKS_PER_NOTE + i
            text = " ".join(words[row])
            chunks.append(
                ChunkRecord(
                    chunk_id=f"c{row}",
                    note_id=meta.note_id,
                    author_id="author",
                    note_version=1,
                    chunk_index=i,
                    heading_path=[meta.title, f"Part {i}"],
                    section_path=f"{meta.title} > Part {i}",
                    content_md=text,
                    start_offset=0,
                    end_offset=len(text),
                    tags=meta.tags,
                    embedding_text=text,
                    vector=vectors[row],
                )
            )
        batch.append((meta, 1, chunks))
        if len(batch) == LOAD_BATCH:
            index.replace_notes(batch)
            batch = []
    index.replace_notes(batch)
    build_s = time.perf_counter() - start
    rss_growth_mb = (_rss_bytes() - rss_before) / 2**20

    queries = [rng.standard_normal(DIM).astype(np.float32) for _ in range(QUERIES)]
    texts = [" ".join(rng.choice(vocab[50:3000], size=3)) for _ in range(QUERIES)]
    one_tag = SearchFilters(tags=["t7"])  # 2% of notes
    half = SearchFilters(tags=["even"])  # 50% of notes

    def vector_only(q: np.ndarray, filters: SearchFilters | None = None) -> ScoredChunks:
        return index.search_hybrid("author", q, None, k_vector=50, k_keyword=0, filters=filters)[0]

    def keyword_only(text: str) -> ScoredChunks:
        return index.search_hybrid("author", None, text, k_vector=0, k_keyword=50)[1]

    vec = _time(vector_only, [(q,) for q in queries])
    vec_f = _time(vector_only, [(q, one_tag) for q in queries])
    vec_h = _time(vector_only, [(q, half) for q in queries])
    kw = _time(keyword_only, [(t,) for t in texts])
    hybrid = _time(
        lambda q, t: index.search_hybrid("author", q, t, k_vector=50, k_keyword=50),
        list(zip(queries, texts, strict=True)),
    )
    # Brute force on a plain matrix in the same run: the floor for exact search.
    floor = _time(lambda q: np.argpartition(-(vectors @ q), 50)[:50], [(q,) for q in queries])
    update = _time(
        lambda n: index.replace_note(
            index.note_meta(f"note{n}"),
            2,
            [
                ChunkRecord(
                    chunk_id=f"u{n}",
                    note_id=f"note{n}",
                    author_id="author",
                    note_version=2,
                    chunk_index=0,
                    heading_path=["u"],
                    section_path="u",
                    content_md="updated text",
                    start_offset=0,
                    end_offset=12,
                    embedding_text="updated text",
                    vector=vectors[n],
                )
            ],
        ),
        [(n,) for n in range(20)],
    )

    stats = index.stats()
    assert stats.chunks == N_CHUNKS - 20 * (CHUNKS_PER_NOTE - 1)
    assert len(vector_only(queries[0])) == 50
    memory_mb = index.memory_bytes() / 2**20
    load = os.getloadavg()[0]
    with capsys.disabled():
        print(
            f"\nlocal index, {N_CHUNKS} chunks × {DIM} dims, one author "
            f"(load average {load:.1f} on {os.cpu_count()} cores)\n"
            f"  load (replace_notes, {LOAD_BATCH} notes a batch): {build_s:.1f} s\n"
            f"  vector top-50, no filter:      {_percentiles(vec)}\n"
            f"  vector top-50, 2% of notes:    {_percentiles(vec_f)}\n"
            f"  vector top-50, 50% of notes:   {_percentiles(vec_h)}\n"
            f"  numpy brute-force floor:       {_percentiles(floor)}\n"
            f"  keyword (BM25) top-50:         {_percentiles(kw)}\n"
            f"  hybrid (both, one state):      {_percentiles(hybrid)}\n"
            f"  replace_note (10 → 1 chunks):  {_percentiles(update)}\n"
            f"  memory_bytes(): {memory_mb:.0f} MiB "
            f"(vectors alone {N_CHUNKS * DIM * 4 / 2**20:.0f} MiB; "
            f"process RSS grew {rss_growth_mb:.0f} MiB while loading)"
        )
