"""Exact vector search for the local backend: one author's vectors in a float32 matrix.

Rows are appended to a `(capacity, dim)` buffer that doubles as it grows; a removed note's
rows are tombstoned, and the buffer is compacted once they exceed a quarter of the rows.
Writers publish an immutable `VectorSnapshot` with one reference assignment and never
modify a published row, so readers take a snapshot without a lock and see one version of
every note. A search is one matrix–vector product and `argpartition`: exact cosine top-k.
The product is memory-bound, so one BLAS thread serves it best (`limit_blas_threads`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass

import numpy as np
import structlog
from threadpoolctl import threadpool_limits

from api.retrieval.types import ChunkData

log = structlog.get_logger(__name__)

_MIN_CAPACITY = 256
# Score only the filtered rows when they are fewer than this share of all rows: gathering
# them costs a copy, which pays off only when it avoids most of the product.
_SUBSET_SHARE = 0.25


def limit_blas_threads(threads: int = 1) -> None:
    """Cap the threads of the BLAS library numpy uses, for the whole process (see the
    module docstring for why search wants 1). Idempotent; other BLAS users in the process
    are affected too, which is why `LocalIndex` lets callers opt out."""
    threadpool_limits(limits=threads, user_api="blas")
    log.debug("local_index.blas_threads_limited", threads=threads)


@dataclass(slots=True, frozen=True)
class VectorSnapshot:
    """An immutable view of the store; rows `[0, size)` of every array are published."""

    matrix: np.ndarray  # (capacity, dim) float32 buffer
    note_ords: np.ndarray  # (capacity,) int64: the note ordinal of each row
    alive: np.ndarray  # (size,) bool: False for tombstoned rows
    chunks: list[ChunkData]  # row → chunk (append-only list; entries past `size` unseen)
    size: int
    live: int  # number of alive rows
    max_ord: int  # largest note ordinal present (-1 when empty)


class VectorStore:
    """One author's vectors; see the module docstring. Writers must be serialised."""

    def __init__(
        self,
        dim: int,
        *,
        initial_capacity: int = _MIN_CAPACITY,
        compact_ratio: float = 0.25,
        compact_min_rows: int = 1024,
    ) -> None:
        if dim <= 0:
            raise ValueError("dim must be positive")
        self.dim = dim
        self._compact_ratio = compact_ratio
        self._compact_min_rows = compact_min_rows
        capacity = max(initial_capacity, 1)
        self._note_rows: dict[int, list[int]] = {}
        self._snap = VectorSnapshot(
            matrix=np.empty((capacity, dim), dtype=np.float32),
            note_ords=np.empty(capacity, dtype=np.int64),
            alive=np.zeros(0, dtype=bool),
            chunks=[],
            size=0,
            live=0,
            max_ord=-1,
        )

    @property
    def snapshot(self) -> VectorSnapshot:
        """The current published snapshot (take it once per search)."""
        return self._snap

    def replace_note(self, note_ord: int, chunks: Sequence[ChunkData], vectors: np.ndarray) -> None:
        """Publish `chunks` (row i has vector `vectors[i]`) as note `note_ord`'s rows and
        tombstone its previous rows, in one snapshot swap."""
        self.replace_notes([(note_ord, chunks, vectors)])

    def replace_notes(self, items: Sequence[tuple[int, Sequence[ChunkData], np.ndarray]]) -> None:
        """`replace_note` for several notes (distinct ordinals) in ONE snapshot swap."""
        checked = [(o, c, self._checked(v, len(c))) for o, c, v in items]
        if len({o for o, _, _ in checked}) != len(checked):
            raise ValueError("a note ordinal appears twice in one batch")
        snap = self._snap
        n = sum(len(c) for _, c, _ in checked)
        size = snap.size
        matrix, note_ords = snap.matrix, snap.note_ords
        if size + n > matrix.shape[0]:
            capacity = max(_MIN_CAPACITY, matrix.shape[0])
            while capacity < size + n:
                capacity *= 2
            matrix = np.empty((capacity, self.dim), dtype=np.float32)
            matrix[:size] = snap.matrix[:size]
            note_ords = np.empty(capacity, dtype=np.int64)
            note_ords[:size] = snap.note_ords[:size]
        chunks_list = snap.chunks
        del chunks_list[size:]  # rows of an unpublished failed write, if any
        alive = np.ones(size + n, dtype=bool)
        alive[:size] = snap.alive
        row = size
        live = snap.live
        max_ord = snap.max_ord
        for note_ord, chunks, vectors in checked:
            count = len(chunks)
            matrix[row : row + count] = vectors
            note_ords[row : row + count] = note_ord
            chunks_list.extend(chunks)
            old_rows = self._note_rows.pop(note_ord, [])
            alive[old_rows] = False
            live += count - len(old_rows)
            if count:
                self._note_rows[note_ord] = list(range(row, row + count))
                max_ord = max(max_ord, note_ord)
            row += count
        self._snap = VectorSnapshot(
            matrix=matrix,
            note_ords=note_ords,
            alive=alive,
            chunks=chunks_list,
            size=size + n,
            live=live,
            max_ord=max_ord,
        )
        dead = self._snap.size - live
        if dead > max(self._compact_min_rows, self._compact_ratio * self._snap.size):
            self.compact()

    def remove_note(self, note_ord: int) -> None:
        """Tombstone every row of note `note_ord` (no-op when absent)."""
        if note_ord in self._note_rows:
            self.replace_note(note_ord, [], np.empty((0, self.dim), dtype=np.float32))

    def compact(self) -> None:
        """Rewrite the buffer without tombstoned rows (into a new buffer: readers holding
        the old snapshot keep reading the old one)."""
        snap = self._snap
        keep = np.flatnonzero(snap.alive)
        capacity = _MIN_CAPACITY
        while capacity < max(len(keep) * 5 // 4, 1):
            capacity *= 2
        matrix = np.empty((capacity, self.dim), dtype=np.float32)
        matrix[: len(keep)] = snap.matrix[keep]
        note_ords = np.empty(capacity, dtype=np.int64)
        note_ords[: len(keep)] = snap.note_ords[keep]
        chunks = [snap.chunks[i] for i in keep]
        remap = {int(old): new for new, old in enumerate(keep)}
        self._note_rows = {o: [remap[r] for r in rows] for o, rows in self._note_rows.items()}
        self._snap = VectorSnapshot(
            matrix=matrix,
            note_ords=note_ords,
            alive=np.ones(len(keep), dtype=bool),
            chunks=chunks,
            size=len(keep),
            live=len(keep),
            max_ord=int(note_ords[: len(keep)].max()) if len(keep) else -1,
        )

    def memory_bytes(self) -> int:
        """Bytes held by the current snapshot's arrays (allocated capacity included)."""
        snap = self._snap
        pointers = 8 * len(snap.chunks)
        return snap.matrix.nbytes + snap.note_ords.nbytes + snap.alive.nbytes + pointers

    def _checked(self, vectors: np.ndarray, n: int) -> np.ndarray:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape != (n, self.dim):
            raise ValueError(f"expected vectors of shape ({n}, {self.dim}), got {vectors.shape}")
        if not np.isfinite(vectors).all():
            raise ValueError("vectors must be finite")
        return vectors


def search_snapshot(
    snap: VectorSnapshot,
    query: np.ndarray,
    k: int,
    note_mask: np.ndarray | None = None,
) -> list[tuple[ChunkData, float]]:
    """Exact top-`k` rows of `snap` by cosine similarity to `query` (L2-normalised here),
    among alive rows of the notes allowed by `note_mask` (a boolean array indexed by note
    ordinal; ordinals past its end are excluded; None: every note). The mask is applied
    before selection, so excluded rows can never take a slot. Equal scores keep row order."""
    if k <= 0 or snap.live == 0:
        return []
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    if q.shape[0] != snap.matrix.shape[1]:
        raise ValueError(f"query has {q.shape[0]} dimensions, index has {snap.matrix.shape[1]}")
    norm = float(np.linalg.norm(q))
    if not np.isfinite(norm) or norm == 0.0:
        return []
    q = q / norm

    size = snap.size
    mask: np.ndarray | None = None if snap.live == size else snap.alive
    if note_mask is not None:
        lut = np.zeros(snap.max_ord + 1, dtype=bool)
        m = min(len(note_mask), len(lut))
        lut[:m] = note_mask[:m]
        rows_allowed = lut[snap.note_ords[:size]]
        mask = rows_allowed if mask is None else rows_allowed & mask

    if mask is None:
        rows = None
        scores = snap.matrix[:size] @ q
    else:
        rows = np.flatnonzero(mask)
        if rows.size == 0:
            return []
        if rows.size < _SUBSET_SHARE * size:
            scores = snap.matrix[rows] @ q
        else:
            scores = (snap.matrix[:size] @ q)[rows]

    n = scores.shape[0]
    if k < n:
        top = np.argpartition(-scores, k - 1)[:k]
    else:
        top = np.arange(n)
    row_ids = top if rows is None else rows[top]
    order = np.lexsort((row_ids, -scores[top]))
    return [(snap.chunks[int(row_ids[i])], float(scores[top[i]])) for i in order]


def vector_of(query_vector: np.ndarray | Future[np.ndarray | None] | None) -> np.ndarray | None:
    """The vector itself, waiting for it (and raising its error) when it is a future."""
    if isinstance(query_vector, Future):
        return query_vector.result()
    return query_vector


def when_ready(
    pool: Executor,
    vector: np.ndarray | Future[np.ndarray | None] | None,
    scan: Callable[[np.ndarray], list[tuple[ChunkData, float]]],
) -> Future[list[tuple[ChunkData, float]]]:
    """`scan(vector)` in `pool` once `vector` is known ([] for None). A pending future holds
    no thread while it waits: its done-callback submits the scan. Its error or cancellation
    becomes the result's."""
    result: Future[list[tuple[ChunkData, float]]] = Future()

    def run(ready: np.ndarray | None) -> None:
        try:
            result.set_result([] if ready is None else scan(ready))
        except BaseException as exc:  # handed to the waiting caller
            result.set_exception(exc)

    def resolved(done: Future[np.ndarray | None]) -> None:
        if done.cancelled():
            result.cancel()
        elif (exc := done.exception()) is not None:
            result.set_exception(exc)
        else:
            pool.submit(run, done.result())

    if isinstance(vector, Future):
        vector.add_done_callback(resolved)
    else:
        pool.submit(run, vector)
    return result
