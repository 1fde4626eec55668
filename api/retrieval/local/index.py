"""The in-process search index behind `SEARCH_BACKEND=local`: exact cosine over float32
matrices (`vectors`) and BM25 (`fulltext`, SQLite FTS5), partitioned by author
(`partition`), with filter masks applied before top-k (`filters`). `LocalIndexSync` feeds
it from `note_chunks`; see docs/search.md (Local).

Each note is held at exactly one version: writers are serialised, and a reader sees either
a note's old or its new chunks, never none and never both. All methods may be called from
any thread; vector products run outside every lock.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import structlog

from api.retrieval.local.fulltext import FullTextIndex
from api.retrieval.local.partition import NoteEntry, Partition, PreparedNote, prepare_note
from api.retrieval.local.vectors import (
    VectorSnapshot,
    VectorStore,
    limit_blas_threads,
    search_snapshot,
    vector_of,
    when_ready,
)
from api.retrieval.types import ChunkData, ChunkRecord, NoteMeta, SearchFilters

log = structlog.get_logger(__name__)

ScoredChunks = list[tuple[ChunkData, float]]
# Below this many chunks a helper thread costs more than the overlap it buys.
PARALLEL_MIN_ROWS = 20_000


@dataclass(slots=True, frozen=True)
class IndexStats:
    """Counts of what the index holds."""

    chunks: int
    notes: int
    authors: int
    dimensions: int


class LocalIndex:
    """Hybrid (vector + BM25) chunk index partitioned by author; see the module docstring.

    `dimensions` is the embedding model's; `heading_weight`/`content_weight` weigh the
    breadcrumb and content columns in BM25; `blas_threads` caps numpy's BLAS threads for
    the process (see `vectors.limit_blas_threads`; None leaves them alone).
    """

    def __init__(
        self,
        dimensions: int,
        *,
        heading_weight: float = 1.0,
        content_weight: float = 1.0,
        blas_threads: int | None = 1,
    ) -> None:
        if dimensions <= 0:
            raise ValueError("dimensions must be positive")
        if blas_threads is not None:
            limit_blas_threads(blas_threads)
        self.dimensions = dimensions
        self._weights = (heading_weight, content_weight)
        self._write_lock = threading.Lock()
        self._authors: dict[str, Partition] = {}
        self._note_author: dict[str, str] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    # ------------------------------------------------------------------ writes

    def replace_note(self, note: NoteMeta, version: int, chunks: Sequence[ChunkRecord]) -> bool:
        """Make `chunks` (all of `version`) the note's only searchable chunks, atomically.

        Returns False (and changes nothing) when the index already holds a newer version.
        Raises `ValueError` when a chunk belongs to another note, author or version, when
        chunk ids repeat, or when a vector has the wrong shape.
        """
        return self.replace_notes([(note, version, chunks)])[0]

    def replace_notes(
        self, items: Sequence[tuple[NoteMeta, int, Sequence[ChunkRecord]]]
    ) -> list[bool]:
        """`replace_note` for many notes at once (start-up loading, catch-up batches): one
        full-text transaction and one vector snapshot swap per author, so readers see the
        batch all-or-nothing per author. Returns, per item, whether it was applied. Every
        item is validated before anything changes; a note may appear only once."""
        if len({note.note_id for note, _, _ in items}) != len(items):
            raise ValueError("a note appears twice in one batch")
        prepared = [prepare_note(n, v, chunks, self.dimensions) for n, v, chunks in items]
        applied: list[bool] = []
        with self._write_lock:
            by_author: dict[str, list[PreparedNote]] = {}
            for p in prepared:
                note_id = p.meta.note_id
                current = self._entry(note_id)
                if current is not None and current.version > p.version:
                    log.debug(
                        "local_index.stale_replace_ignored",
                        note_id=note_id,
                        held_version=current.version,
                        version=p.version,
                    )
                    applied.append(False)
                    continue
                old_author = self._note_author.get(note_id)
                if old_author is not None and old_author != p.meta.author_id:
                    self._remove_locked(note_id)
                by_author.setdefault(p.meta.author_id, []).append(p)
                applied.append(True)
            for author_id, group in by_author.items():
                self._partition(author_id).swap_in(group)
                for p in group:
                    self._note_author[p.meta.note_id] = author_id
        return applied

    def remove_note(self, note_id: str) -> bool:
        """Drop the note and all its chunks; False when it was not indexed."""
        with self._write_lock:
            return self._remove_locked(note_id)

    def remove_author(self, author_id: str) -> int:
        """Drop every note of the author (their partition); returns how many. Readers
        holding the partition finish on it."""
        with self._write_lock:
            part = self._authors.pop(author_id, None)
            if part is None:
                return 0
            for note_id in part.notes:
                self._note_author.pop(note_id, None)
            return len(part.notes)

    def update_note_meta(self, note: NoteMeta) -> bool:
        """Replace a held note's metadata (title, tags, updated_at) without touching its
        chunks; filters see the new values at once. False when the note is not indexed."""
        with self._write_lock:
            author = self._note_author.get(note.note_id)
            if author is None:
                return False
            if author != note.author_id:
                raise ValueError("a note's author cannot change through update_note_meta")
            self._authors[author].set_meta(note)
            return True

    def close(self) -> None:
        """Release every author's full-text database."""
        with self._write_lock:
            for part in self._authors.values():
                with part.lock:
                    part.fulltext.close()
            self._authors.clear()
            self._note_author.clear()
        with self._executor_lock:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None

    # ------------------------------------------------------------------ reads

    def note_version(self, note_id: str) -> int | None:
        """The version of the note the index holds, or None."""
        entry = self._entry(note_id)
        return entry.version if entry is not None else None

    def note_meta(self, note_id: str) -> NoteMeta | None:
        """The held metadata of a note (its `indexed_version` set), or None."""
        entry = self._entry(note_id)
        return entry.meta if entry is not None else None

    def search_hybrid(
        self,
        author_id: str,
        query_vector: np.ndarray | Future[np.ndarray | None] | None,
        query: str | None,
        *,
        k_vector: int,
        k_keyword: int,
        filters: SearchFilters | None = None,
    ) -> tuple[ScoredChunks, ScoredChunks]:
        """Vector and keyword results evaluated against ONE state of the index (the same
        version of every note in both lists). Pass None to skip a retriever.

        `query_vector` may be a `concurrent.futures.Future` still being computed (the query
        embedding): BM25 ranks meanwhile, and the vector scan starts when it resolves (its
        exception, e.g. an embedding error, is raised from here). For large partitions the
        vector product runs in a helper thread while SQLite ranks (both release the GIL),
        so the call costs about the slowest of embedding + scan and BM25, not their sum."""
        part = self._authors.get(author_id)
        if part is None:
            vector_of(query_vector)  # an embedding failure is still the caller's news
            return [], []
        want_vector = query_vector is not None and k_vector > 0
        want_keyword = query is not None and k_keyword > 0
        pending: Future[ScoredChunks] | None = None
        vector: ScoredChunks = []
        keyword: ScoredChunks = []
        with part.lock:
            mask = part.note_mask(filters)
            snapshot = part.vectors.snapshot
            if want_vector and want_keyword and snapshot.live >= PARALLEL_MIN_ROWS:
                pending = when_ready(
                    self._pool(),
                    query_vector,
                    lambda v: _vector_search(snapshot, v, k_vector, mask),
                )
            if want_keyword:
                allowed = part.allowed_list(mask)
                if allowed is None or allowed:
                    keyword = part.fulltext.search(query, k_keyword, allowed)
        if pending is not None:
            vector = pending.result()
        elif want_vector:
            ready = vector_of(query_vector)
            vector = [] if ready is None else _vector_search(snapshot, ready, k_vector, mask)
        return vector, keyword

    def stats(self) -> IndexStats:
        """Chunks, notes and authors held."""
        parts = list(self._authors.values())
        return IndexStats(
            chunks=sum(p.vectors.snapshot.live for p in parts),
            notes=len(self._note_author),
            authors=len(parts),
            dimensions=self.dimensions,
        )

    def memory_bytes(self) -> int:
        """Estimated bytes held: vector buffers (allocated capacity, tombstones included),
        FTS5 pages and per-connection cost, and the Python objects of chunks and notes
        (`sys.getsizeof` of each object, string and list)."""
        total = sys.getsizeof(self._authors) + sys.getsizeof(self._note_author)
        return total + sum(part.memory_bytes() for part in list(self._authors.values()))

    # ------------------------------------------------------------------ internals

    def _pool(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=2, thread_name_prefix="local-index-vector"
                )
            return self._executor

    def _entry(self, note_id: str) -> NoteEntry | None:
        author = self._note_author.get(note_id)
        part = self._authors.get(author) if author is not None else None
        return part.notes.get(note_id) if part is not None else None

    def _partition(self, author_id: str) -> Partition:
        part = self._authors.get(author_id)
        if part is None:
            part = Partition(
                vectors=VectorStore(self.dimensions),
                fulltext=FullTextIndex(
                    heading_weight=self._weights[0], content_weight=self._weights[1]
                ),
            )
            self._authors[author_id] = part
        return part

    def _remove_locked(self, note_id: str) -> bool:
        author = self._note_author.pop(note_id, None)
        if author is None:
            return False
        part = self._authors[author]
        part.drop(note_id)
        if not part.notes:
            # Readers holding this partition finish on it; the connection closes with it.
            del self._authors[author]
        return True


def _vector_search(
    snapshot: VectorSnapshot, query_vector: np.ndarray, k: int, mask: np.ndarray | None
) -> ScoredChunks:
    if mask is not None and not mask.any():
        return []
    return search_snapshot(snapshot, query_vector, k, mask)
