"""The float32 vector store: exact search, growth, tombstones, compaction, snapshots."""

from __future__ import annotations

import numpy as np
import pytest

from api.retrieval.local.vectors import VectorStore, search_snapshot
from api.retrieval.types import ChunkData

DIM = 8


def rows(note_ord: int, n: int) -> list[ChunkData]:
    return [
        ChunkData(
            chunk_id=f"{note_ord}:{i}",
            note_id=f"n{note_ord}",
            author_id="alice",
            note_version=1,
            chunk_index=i,
            heading_path=["T"],
            section_path="T",
            content_md="x",
            start_offset=0,
            end_offset=1,
        )
        for i in range(n)
    ]


def unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    m = rng.standard_normal((n, DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def brute_force(live: dict[str, np.ndarray], q: np.ndarray, k: int) -> list[str]:
    ids = sorted(live)
    scores = np.array([float(live[i] @ q) for i in ids])
    order = np.argsort(-scores, kind="stable")[:k]
    return [ids[i] for i in order]


def test_search_equals_brute_force_through_growth_deletes_and_compaction() -> None:
    rng = np.random.default_rng(1)
    store = VectorStore(DIM, initial_capacity=4, compact_min_rows=8)
    live: dict[str, np.ndarray] = {}
    for note_ord in range(60):
        n = int(rng.integers(0, 6))
        vecs = unit_rows(rng, n)
        for c in [c for c in live if c.startswith(f"{note_ord}:")]:
            del live[c]
        store.replace_note(note_ord, rows(note_ord, n), vecs)
        live.update({f"{note_ord}:{i}": vecs[i] for i in range(n)})
        if note_ord % 7 == 3:  # replace an older note and remove another: tombstones
            old = note_ord // 2
            vecs = unit_rows(rng, 2)
            for c in [c for c in live if c.startswith(f"{old}:")]:
                del live[c]
            store.replace_note(old, rows(old, 2), vecs)
            live.update({f"{old}:{i}": vecs[i] for i in range(2)})
            store.remove_note(old + 1)
            for c in [c for c in live if c.startswith(f"{old + 1}:")]:
                del live[c]
    snap = store.snapshot
    assert snap.live == len(live)
    assert snap.size < 3 * len(live)  # compaction ran: tombstones do not accumulate
    for _ in range(20):
        q = rng.standard_normal(DIM).astype(np.float32)
        qn = q / np.linalg.norm(q)
        got = search_snapshot(snap, q, 10)
        assert [c.chunk_id for c, _ in got] == brute_force(live, qn, 10)
        expected_scores = sorted((float(v @ qn) for v in live.values()), reverse=True)[:10]
        assert [s for _, s in got] == pytest.approx(expected_scores, abs=1e-5)


def test_filter_mask_before_top_k_and_subset_path() -> None:
    rng = np.random.default_rng(2)
    store = VectorStore(DIM)
    q = unit_rows(rng, 1)[0]
    store.replace_note(0, rows(0, 200), np.tile(q, (200, 1)))  # perfect matches
    far = -q + 0.01 * unit_rows(rng, 1)[0]
    store.replace_note(1, rows(1, 3), np.tile(far / np.linalg.norm(far), (3, 1)))
    got = search_snapshot(store.snapshot, q, 3, note_mask=np.array([False, True]))
    assert [c.note_id for c, _ in got] == ["n1"] * 3
    assert search_snapshot(store.snapshot, q, 3, note_mask=np.array([False, False])) == []
    # k larger than the matching rows returns them all.
    assert len(search_snapshot(store.snapshot, q, 50, note_mask=np.array([False, True]))) == 3


def test_published_snapshot_is_immutable() -> None:
    rng = np.random.default_rng(3)
    store = VectorStore(DIM, initial_capacity=2, compact_min_rows=1, compact_ratio=0.0)
    vecs = unit_rows(rng, 3)
    store.replace_note(0, rows(0, 3), vecs)
    before = store.snapshot
    q = vecs[0]
    expected = [(c.chunk_id, s) for c, s in search_snapshot(before, q, 3)]
    # Growth, tombstones and compaction after the snapshot was taken do not affect it.
    store.replace_note(1, rows(1, 50), unit_rows(rng, 50))
    store.replace_note(0, rows(0, 1), unit_rows(rng, 1))
    store.remove_note(1)
    assert store.snapshot is not before
    assert [(c.chunk_id, s) for c, s in search_snapshot(before, q, 3)] == expected
    assert store.snapshot.live == 1


def test_bad_inputs() -> None:
    store = VectorStore(DIM)
    with pytest.raises(ValueError):
        store.replace_note(0, rows(0, 2), np.zeros((2, DIM + 1), dtype=np.float32))
    with pytest.raises(ValueError):
        store.replace_note(0, rows(0, 1), np.full((1, DIM), np.nan, dtype=np.float32))
    store.replace_note(0, rows(0, 1), np.ones((1, DIM), dtype=np.float32))
    with pytest.raises(ValueError):
        search_snapshot(store.snapshot, np.ones(DIM + 1), 1)
    assert search_snapshot(store.snapshot, np.zeros(DIM), 1) == []
    assert search_snapshot(store.snapshot, np.ones(DIM), 0) == []
