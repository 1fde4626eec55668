"""LocalIndex: author isolation, pre-filters, atomic version swaps, exactness, accounting."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import numpy as np
import pytest

from api.retrieval.local.index import LocalIndex, ScoredChunks
from api.retrieval.types import SearchFilters
from tests.retrieval.builders import DIM, T0, chunk, note, random_unit, unit


def vector_only(
    index: LocalIndex, author: str, q: np.ndarray, k: int, filters: SearchFilters | None = None
) -> ScoredChunks:
    """The vector list of `search_hybrid` with the keyword retriever skipped."""
    return index.search_hybrid(author, q, None, k_vector=k, k_keyword=0, filters=filters)[0]


def keyword_only(
    index: LocalIndex, author: str, query: str, k: int, filters: SearchFilters | None = None
) -> ScoredChunks:
    """The keyword list of `search_hybrid` with the vector retriever skipped."""
    return index.search_hybrid(author, None, query, k_vector=0, k_keyword=k, filters=filters)[1]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(42)


def test_other_authors_chunks_never_returned_even_when_they_are_the_only_matches(
    rng: np.random.Generator,
) -> None:
    index = LocalIndex(DIM)
    q = random_unit(rng)
    bob = note("bob-note", "bob")
    # Bob: many chunks identical to the query and full of the query word.
    index.replace_note(
        bob, 1, [chunk(bob, i, q, text="kubernetes upgrade secret plan") for i in range(100)]
    )
    alice = note("alice-note", "alice")
    index.replace_note(alice, 1, [chunk(alice, 0, -q, text="gardening tomatoes")])

    vector = vector_only(index, "alice", q, 10)
    assert [c.note_id for c, _ in vector] == ["alice-note"]
    assert keyword_only(index, "alice", "kubernetes secret", 10) == []
    v, k = index.search_hybrid("alice", q, "kubernetes", k_vector=10, k_keyword=10)
    assert {c.author_id for c, _ in v + k} == {"alice"}
    # Filters naming Bob's note do not reach it either.
    only_bob = SearchFilters(note_ids=["bob-note"])
    assert vector_only(index, "alice", q, 10, only_bob) == []
    assert keyword_only(index, "alice", "kubernetes", 10, only_bob) == []
    # An unknown author has nothing.
    assert vector_only(index, "carol", q, 10) == []
    assert keyword_only(index, "carol", "kubernetes", 10) == []


def test_filters_apply_before_top_k(rng: np.random.Generator) -> None:
    index = LocalIndex(DIM)
    q = random_unit(rng)
    # 40 notes that match the query perfectly but fail every filter below.
    for n in range(40):
        meta = note(f"noise{n}", tags=["noise"], days=0)
        index.replace_note(
            meta, 1, [chunk(meta, i, q, text="deploy deploy deploy") for i in range(5)]
        )
    # Three weakly matching chunks in notes that pass.
    weak = unit(q + 3.0 * random_unit(rng))
    wanted = [note(f"want{n}", tags=["want", "x"], days=10) for n in range(3)]
    for meta in wanted:
        index.replace_note(meta, 1, [chunk(meta, 0, weak, text="we deploy on fridays rarely")])
    want_ids = {m.note_id for m in wanted}

    for filters in [
        SearchFilters(tags=["want"]),
        SearchFilters(tags=["absent", "x"]),  # ANY-of
        SearchFilters(note_ids=sorted(want_ids)),
        SearchFilters(updated_after=T0 + timedelta(days=5)),
        SearchFilters(updated_after=(T0 + timedelta(days=5)).replace(tzinfo=None)),  # naive=UTC
    ]:
        vec = vector_only(index, "alice", q, 3, filters)
        assert {c.note_id for c, _ in vec} == want_ids, filters
        kw = keyword_only(index, "alice", "deploy", 3, filters)
        assert {c.note_id for c, _ in kw} == want_ids, filters
        hv, hk = index.search_hybrid("alice", q, "deploy", k_vector=3, k_keyword=3, filters=filters)
        assert {c.note_id for c, _ in hv} == {c.note_id for c, _ in hk} == want_ids

    nothing = SearchFilters(tags=[])
    assert vector_only(index, "alice", q, 3, nothing) == []
    assert keyword_only(index, "alice", "deploy", 3, nothing) == []
    assert index.search_hybrid("alice", q, "deploy", k_vector=3, k_keyword=3, filters=nothing) == (
        [],
        [],
    )


def test_replace_swaps_versions_and_ignores_stale_updates(rng: np.random.Generator) -> None:
    index = LocalIndex(DIM)
    meta = note("n")
    v1 = [chunk(meta, i, random_unit(rng), version=1, text=f"first draft {i}") for i in range(3)]
    assert index.replace_note(meta, 1, v1)
    v2 = [chunk(meta, 0, random_unit(rng), version=2, text="second version")]
    assert index.replace_note(meta, 2, v2)
    assert index.note_version("n") == 2
    assert index.note_meta("n").indexed_version == 2
    assert keyword_only(index, "alice", "draft", 10) == []
    assert [c.chunk_id for c, _ in vector_only(index, "alice", random_unit(rng), 10)] == ["n:v2:0"]
    # An out-of-order (older) update is ignored.
    assert index.replace_note(meta, 1, v1) is False
    assert index.note_version("n") == 2
    assert index.stats().chunks == 1


def test_remove_note_and_update_meta(rng: np.random.Generator) -> None:
    index = LocalIndex(DIM)
    a, b = note("a", tags=["old"]), note("b")
    index.replace_note(a, 1, [chunk(a, 0, random_unit(rng), text="apples")])
    index.replace_note(b, 1, [chunk(b, 0, random_unit(rng), text="bananas")])
    assert index.update_note_meta(note("a", tags=["new"], title="Renamed"))
    assert index.note_meta("a").title == "Renamed"
    assert index.note_meta("a").indexed_version == 1
    assert [
        c.note_id for c, _ in keyword_only(index, "alice", "apples", 5, SearchFilters(tags=["new"]))
    ] == ["a"]
    assert keyword_only(index, "alice", "apples", 5, SearchFilters(tags=["old"])) == []
    assert index.update_note_meta(note("zzz")) is False
    with pytest.raises(ValueError):
        index.update_note_meta(note("a", "mallory"))

    assert index.remove_note("a") is True
    assert index.remove_note("a") is False
    assert index.note_version("a") is None
    assert keyword_only(index, "alice", "apples", 5) == []
    assert index.stats().notes == 1
    index.remove_note("b")
    stats = index.stats()
    assert (stats.chunks, stats.notes, stats.authors) == (0, 0, 0)


def test_invalid_chunks_are_rejected_without_side_effects(rng: np.random.Generator) -> None:
    index = LocalIndex(DIM)
    meta = note("n")
    good = chunk(meta, 0, random_unit(rng))
    other_note = chunk(note("m"), 0, random_unit(rng))
    wrong_version = chunk(meta, 1, random_unit(rng), version=3)
    with pytest.raises(ValueError, match="another note"):
        index.replace_note(meta, 1, [good, other_note])
    with pytest.raises(ValueError, match="version"):
        index.replace_note(meta, 1, [good, wrong_version])
    with pytest.raises(ValueError, match="twice"):
        index.replace_note(meta, 1, [good, good])
    bad_dim = chunk(meta, 1, np.ones(DIM + 2))
    with pytest.raises(ValueError, match="shape"):
        index.replace_note(meta, 1, [bad_dim])
    assert index.stats().notes == 0


def test_vector_results_equal_brute_force(rng: np.random.Generator) -> None:
    index = LocalIndex(DIM)
    live: dict[str, np.ndarray] = {}
    for n in range(80):
        meta = note(f"n{n}", tags=["even" if n % 2 == 0 else "odd"])
        chunks = [chunk(meta, i, random_unit(rng)) for i in range(int(rng.integers(1, 6)))]
        index.replace_note(meta, 1, chunks)
        live.update({c.chunk_id: (c.vector, meta.tags[0]) for c in chunks})
    for n in range(0, 80, 3):  # churn: new versions for a third of the notes
        meta = note(f"n{n}", tags=["even" if n % 2 == 0 else "odd"])
        for key in [k for k in live if k.startswith(f"n{n}:")]:
            del live[key]
        chunks = [chunk(meta, i, random_unit(rng), version=2) for i in range(2)]
        index.replace_note(meta, 2, chunks)
        live.update({c.chunk_id: (c.vector, meta.tags[0]) for c in chunks})
    for _ in range(10):
        q = random_unit(rng)
        for tag in [None, "odd"]:
            pool = {k: v for k, (v, t) in live.items() if tag is None or t == tag}
            keys = sorted(pool)
            matrix = np.stack([pool[k] for k in keys])
            scores = matrix @ q
            expected = [keys[i] for i in np.argsort(-scores)[:7]]
            filters = SearchFilters(tags=[tag]) if tag else None
            got = vector_only(index, "alice", q, 7, filters)
            assert [c.chunk_id for c, _ in got] == expected
            assert [s for _, s in got] == pytest.approx(sorted(scores, reverse=True)[:7], abs=1e-5)


def test_readers_never_see_zero_or_two_versions_during_replacements(
    rng: np.random.Generator,
) -> None:
    index = LocalIndex(DIM)
    meta = note("hot")
    vectors = [random_unit(rng) for _ in range(4)]
    q = vectors[0]

    def version(v: int) -> list:
        return [chunk(meta, i, vectors[i], version=v, text=f"shared words v{v}") for i in range(4)]

    index.replace_note(meta, 1, version(1))
    stop = threading.Event()
    problems: list[str] = []
    reads = [0]

    def reader() -> None:
        while not stop.is_set():
            vec, kw = index.search_hybrid("alice", q, "shared words", k_vector=50, k_keyword=50)
            solo = keyword_only(index, "alice", "shared", 50)
            solo_vec = vector_only(index, "alice", q, 50)
            for name, results in [("vector", vec), ("keyword", kw), ("kw", solo), ("v", solo_vec)]:
                versions = {c.note_version for c, _ in results}
                if len(results) != 4 or len(versions) != 1:
                    problems.append(f"{name}: {len(results)} chunks, versions {versions}")
            if {c.note_version for c, _ in vec} != {c.note_version for c, _ in kw}:
                problems.append("hybrid lists disagree on the version")
            reads[0] += 1

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    # Replacements for 1.5 s at least, and on a slow machine until enough reads and
    # replacements interleaved (or a reader died).
    deadline = time.monotonic() + 1.5
    v = 1

    def more() -> bool:
        enough = reads[0] > 10 and v > 10
        return time.monotonic() < deadline or (not enough and all(t.is_alive() for t in threads))

    while more():
        v += 1
        index.replace_note(meta, v, version(v))
    stop.set()
    for t in threads:
        t.join()
    assert reads[0] > 10 and v > 10
    assert problems == []


def test_stats_and_memory_accounting(rng: np.random.Generator) -> None:
    index = LocalIndex(DIM)
    empty = index.memory_bytes()
    for a in range(3):
        for n in range(5):
            meta = note(f"{a}-{n}", f"author{a}")
            text = "lorem ipsum dolor " * 50
            index.replace_note(
                meta, 1, [chunk(meta, i, random_unit(rng), text=text) for i in range(4)]
            )
    stats = index.stats()
    assert (stats.chunks, stats.notes, stats.authors, stats.dimensions) == (60, 15, 3, DIM)
    used = index.memory_bytes()
    text_bytes = 60 * len("lorem ipsum dolor " * 50)
    assert used - empty > text_bytes + 60 * DIM * 4
    assert used < 50 * 1024 * 1024


def test_replace_notes_batch(rng: np.random.Generator) -> None:
    index = LocalIndex(DIM)
    a, b, c = note("a"), note("b", "bob"), note("c")
    index.replace_note(c, 5, [chunk(c, 0, random_unit(rng), version=5)])
    applied = index.replace_notes(
        [
            (a, 1, [chunk(a, i, random_unit(rng), text="alpha words") for i in range(3)]),
            (b, 2, [chunk(b, 0, random_unit(rng), version=2, text="bob words")]),
            (c, 4, [chunk(c, 0, random_unit(rng), version=4)]),  # older than held: ignored
        ]
    )
    assert applied == [True, True, False]
    assert (index.note_version("a"), index.note_version("b"), index.note_version("c")) == (1, 2, 5)
    assert len(keyword_only(index, "alice", "alpha", 10)) == 3
    assert [x.note_id for x, _ in keyword_only(index, "bob", "words", 10)] == ["b"]
    with pytest.raises(ValueError, match="twice"):
        index.replace_notes([(a, 2, []), (a, 3, [])])
    with pytest.raises(ValueError):  # one bad item: nothing of the batch is applied
        index.replace_notes([(a, 9, []), (b, 9, [chunk(a, 0, random_unit(rng), version=9)])])
    assert index.note_version("a") == 1


def test_removed_then_readded_note_is_filtered_by_its_new_metadata(
    rng: np.random.Generator,
) -> None:
    index = LocalIndex(DIM)
    first = note("n", tags=["red"])
    index.replace_note(first, 1, [chunk(first, 0, random_unit(rng), text="sky")])
    index.remove_note("n")
    again = note("n", tags=["blue"])
    index.replace_note(again, 2, [chunk(again, 0, random_unit(rng), version=2, text="sky")])
    assert keyword_only(index, "alice", "sky", 5, SearchFilters(tags=["red"])) == []
    assert len(keyword_only(index, "alice", "sky", 5, SearchFilters(tags=["blue"]))) == 1
    assert len(vector_only(index, "alice", random_unit(rng), 5, SearchFilters(tags=["blue"]))) == 1


def test_parallel_hybrid_matches_sequential(
    rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    import api.retrieval.local.index as local_index

    index = LocalIndex(DIM)
    for n in range(30):
        meta = note(f"n{n}", tags=["t"] if n % 3 == 0 else [])
        words = "river stone" if n % 2 else "mountain lake"
        index.replace_note(
            meta, 1, [chunk(meta, i, random_unit(rng), text=words) for i in range(4)]
        )
    q = random_unit(rng)
    args = ("alice", q, "river lake")
    for filters in [None, SearchFilters(tags=["t"])]:
        monkeypatch.setattr(local_index, "PARALLEL_MIN_ROWS", 10**9)
        sequential = index.search_hybrid(*args, k_vector=10, k_keyword=10, filters=filters)
        monkeypatch.setattr(local_index, "PARALLEL_MIN_ROWS", 0)
        parallel = index.search_hybrid(*args, k_vector=10, k_keyword=10, filters=filters)
        assert sequential == parallel
        vector, keyword = parallel
        assert len(vector) == 10 and len(keyword) == 10
    index.close()


@pytest.mark.parametrize("parallel_min_rows", [0, 10**9])
def test_hybrid_ranks_keywords_while_the_query_vector_is_still_coming(
    rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch, parallel_min_rows: int
) -> None:
    """`search_hybrid` takes the query embedding as a future: BM25 runs before it resolves,
    the vector scan after, and both lists equal those of a call given the vector itself;
    an embedding error is raised to the caller, a cancelled embedding cancels the call."""
    from concurrent.futures import CancelledError, Future, ThreadPoolExecutor

    import api.retrieval.local.index as local_index

    monkeypatch.setattr(local_index, "PARALLEL_MIN_ROWS", parallel_min_rows)
    index = LocalIndex(DIM)
    for n in range(12):
        meta = note(f"n{n}")
        words = "river stone" if n % 2 else "mountain lake"
        index.replace_note(
            meta, 1, [chunk(meta, i, random_unit(rng), text=words) for i in range(3)]
        )
    q = random_unit(rng)
    want = index.search_hybrid("alice", q, "river", k_vector=5, k_keyword=5)

    searched_keywords = threading.Event()
    real_search = index._authors["alice"].fulltext.search

    def spy(*args: object, **kw: object) -> object:
        searched_keywords.set()
        return real_search(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(index._authors["alice"].fulltext, "search", spy)
    with ThreadPoolExecutor(1) as pool:
        later: Future[np.ndarray] = Future()
        call = pool.submit(index.search_hybrid, "alice", later, "river", k_vector=5, k_keyword=5)
        assert searched_keywords.wait(10), "BM25 did not start before the vector arrived"
        assert not call.done()
        later.set_result(q)
        assert call.result(10) == want

        failing: Future[np.ndarray] = Future()
        call = pool.submit(index.search_hybrid, "alice", failing, "river", k_vector=5, k_keyword=5)
        failing.set_exception(RuntimeError("embedding provider down"))
        with pytest.raises(RuntimeError, match="provider down"):
            call.result(10)

        cancelled: Future[np.ndarray] = Future()
        call = pool.submit(
            index.search_hybrid, "alice", cancelled, "river", k_vector=5, k_keyword=5
        )
        cancelled.cancel()
        with pytest.raises(CancelledError):
            call.result(10)
    index.close()
