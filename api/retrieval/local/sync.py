"""Keeps a process's in-memory `LocalIndex` equal to what `note_chunks` says is searchable.

- At start-up every active note's chunks of its `indexed_version` are loaded.
- The in-process reconciler calls `refresh_note` right after it commits, inside
  `committing`: a search by that note's author waits for both (read-your-writes).
- A poll loop picks up what other processes committed (separate `autonote worker`s, other
  API processes): notes whose `indexed_at` moved since the last poll (with a margin for
  clock skew between machines), so a worker's commit is searchable here within a second.
A note is (re)loaded only as a whole version: if its chunk count does not match (a newer
version was committed and evicted this one meanwhile) the load is skipped — the newer
commit has a later `indexed_at` and arrives next.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from api.chunk_store.repository import ChunksRepository
from api.chunk_store.vectors import from_bson_vector
from api.indexing.queue import IndexQueue
from api.notes.repository import NotesSearchQueries
from api.notes.stored import note_status, note_tags, note_title, note_updated_at
from api.retrieval.local.index import LocalIndex
from api.retrieval.types import ChunkRecord, NoteMeta, as_utc, section_index_of
from api.tasks import cancel_and_wait

log = structlog.get_logger(__name__)

CLOCK_SKEW = timedelta(seconds=5)


def note_meta(doc: dict[str, Any]) -> NoteMeta:
    """Search metadata of a note document."""
    return NoteMeta(
        note_id=str(doc["_id"]),
        author_id=str(doc["author_id"]),
        title=note_title(doc),
        tags=note_tags(doc),
        updated_at=note_updated_at(doc),
        indexed_version=doc.get("indexed_version"),
    )


def chunk_record(doc: dict[str, Any]) -> ChunkRecord:
    """A `note_chunks` document as the local index takes it."""
    heading_path = [str(h) for h in doc.get("heading_path") or []]
    section_path = doc.get("section_path") or " > ".join(heading_path)
    return ChunkRecord(
        chunk_id=str(doc["_id"]),
        note_id=str(doc["note_id"]),
        author_id=str(doc["author_id"]),
        note_version=int(doc["note_version"]),
        chunk_index=int(doc["chunk_index"]),
        heading_path=heading_path,
        section_index=section_index_of(doc),
        section_path=section_path,
        content_md=doc.get("content_md", ""),
        start_offset=int(doc.get("start_offset", 0)),
        end_offset=int(doc.get("end_offset", 0)),
        tags=note_tags(doc),
        chunk_type=doc.get("chunk_type", "text"),
        aliases=chunk_aliases(doc),
        embedding_text=f"{section_path}\n\n{doc.get('content_md', '')}",
        vector=from_bson_vector(doc["embedding"]),
    )


def chunk_aliases(doc: dict[str, Any]) -> tuple[str, ...]:
    """The note's aliases a stored chunk carries (`metadata.aliases`, strings only)."""
    metadata = doc.get("metadata")
    aliases = metadata.get("aliases") if isinstance(metadata, dict) else None
    if not isinstance(aliases, list):
        return ()
    return tuple(a for a in aliases if isinstance(a, str))


# Notes with more chunks than this are applied in a worker thread (see `_apply_off_loop`).
_INLINE_APPLY_CHUNKS = 200
# The ordering records are pruned when they reach this many entries (or twice what the
# last pruning kept).
PRUNE_MIN_ENTRIES = 10_000
# A search waits at most this long for its author's in-process commits (`catch_up`).
CATCH_UP_WAIT_S = 2.0


class LocalIndexSync:
    """Loads and follows `note_chunks` into a `LocalIndex`."""

    def __init__(
        self, db: AsyncDatabase, index: LocalIndex, *, model_key: str, poll_s: float = 0.5
    ) -> None:
        self.index = index
        self.model_key = model_key
        self.poll_s = poll_s
        self._chunks = ChunksRepository(db)
        self._queue = IndexQueue(db)
        self._notes = NotesSearchQueries(db)
        self._latest: datetime | None = None  # newest `indexed_at` applied
        self._applied: dict[str, tuple[Any, Any]] = {}
        # Ordering of applies (in a worker thread) and removals (on the loop), per note: see
        # `_apply_off_loop`.
        self._tick = 0
        self._removed_at: dict[str, int] = {}
        self._apply_started: dict[str, int] = {}
        # Start ticks of the reads+applies under way (see `_prune`); ticks are unique.
        self._in_flight: set[int] = set()
        self._prune_at = PRUNE_MIN_ENTRIES
        # Per author: one future per in-process commit under way (see `committing`).
        self._commits: dict[str, set[asyncio.Future[None]]] = {}
        self._task: asyncio.Task[None] | None = None
        self.loaded = asyncio.Event()

    async def load_all(self, batch: int = 200) -> int:
        """Load every searchable note; returns the number of chunks loaded."""
        started = datetime.now(UTC)
        total = 0
        pending: list[dict[str, Any]] = []
        async for doc in self._notes.iter_indexed():
            pending.append(doc)
            if len(pending) >= batch:
                total += await self._load_batch(pending)
                pending = []
        if pending:
            total += await self._load_batch(pending)
        self._latest = started
        self.loaded.set()
        stats = self.index.stats()
        log.info(
            "search.local_index_loaded",
            chunks=stats.chunks,
            notes=stats.notes,
            memory_mb=round(self.index.memory_bytes() / 2**20, 1),
        )
        return total

    async def _load_batch(self, notes: list[dict[str, Any]]) -> int:
        with self._reading() as started:
            by_note: dict[ObjectId, list[dict[str, Any]]] = {n["_id"]: [] for n in notes}
            pairs = [(n["_id"], int(n["indexed_version"])) for n in notes]
            async for chunk in self._chunks.iter_versions(pairs):
                by_note[chunk["note_id"]].append(chunk)
            loaded = 0
            for note in notes:
                loaded += await self._apply_off_loop(note, by_note[note["_id"]], started)
        self._maybe_prune()
        return loaded

    def _apply(self, note: dict[str, Any], chunks: list[dict[str, Any]]) -> int:
        note_id = str(note["_id"])
        usable = [c for c in chunks if c.get("embedding_model") == self.model_key]
        if len(chunks) != int(note.get("chunk_count") or 0) or len(usable) != len(chunks):
            return 0  # superseded meanwhile, or made by another model (being re-indexed)
        version = int(note["indexed_version"])
        self.index.replace_note(note_meta(note), version, [chunk_record(c) for c in usable])
        self._applied[note_id] = (version, note.get("indexed_at"))
        return len(usable)

    async def refresh_note(self, note: dict[str, Any]) -> None:
        """Bring one note up to date from its (just committed) document."""
        note_id = str(note["_id"])
        version = note.get("indexed_version")
        if note_status(note) != "active" or version is None:
            self._drop(note_id)
            return
        if self._applied.get(note_id) == (version, note.get("indexed_at")):
            return
        with self._reading() as started:
            chunks = await self._chunks.for_version(note["_id"], int(version), with_vectors=True)
            await self._apply_off_loop(note, chunks, started)
        self._maybe_prune()

    @asynccontextmanager
    async def committing(self, note: dict[str, Any]) -> AsyncIterator[None]:
        """Around an in-process commit of `note` and its `refresh_note`: until both are
        done, a search by the note's author waits for them (`catch_up`)."""
        author = str(note.get("author_id"))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._commits.setdefault(author, set()).add(done)
        try:
            yield
        finally:
            done.set_result(None)
            pending = self._commits[author]  # holds `done` until now: never removed before
            pending.discard(done)
            if not pending:
                del self._commits[author]

    async def catch_up(self, author_id: ObjectId) -> int:
        """Read-your-writes for one author: wait (at most CATCH_UP_WAIT_S) for their
        commits in flight in this process when the search started; returns how many.

        A note reads `indexed` as soon as its commit lands, and the refresh that makes it
        searchable here runs a database read later: without the wait, a search sent in
        between finds nothing (tests/retrieval/test_read_your_writes.py). Commits of other
        processes arrive with the next poll (`poll_s`)."""
        pending = self._commits.get(str(author_id))
        if not pending:
            return 0
        waiting = list(pending)
        _, late = await asyncio.wait(waiting, timeout=CATCH_UP_WAIT_S)
        if late:
            log.warning("search.catch_up_timeout", commits=len(late), timeout_s=CATCH_UP_WAIT_S)
        return len(waiting)

    def remove(self, note_id: ObjectId) -> None:
        """A note was purged: drop it now (the poll cannot see deleted documents)."""
        self._drop(str(note_id))

    def _next_tick(self) -> int:
        self._tick += 1
        return self._tick

    @contextmanager
    def _reading(self) -> Iterator[int]:
        """A read and apply of chunks: its start tick, registered while it runs."""
        started = self._next_tick()
        self._in_flight.add(started)
        try:
            yield started
        finally:
            self._in_flight.discard(started)

    def _maybe_prune(self) -> None:
        """`_prune` once the ordering records have doubled since the last one (amortized
        O(1) per apply)."""
        if len(self._removed_at) + len(self._apply_started) >= self._prune_at:
            self._prune()
            kept = len(self._removed_at) + len(self._apply_started)
            self._prune_at = max(PRUNE_MIN_ENTRIES, 2 * kept)

    def _prune(self) -> None:
        """Forget ordering records older than every read under way, so they do not keep
        an entry per note for the process's lifetime. Dropping them decides nothing
        differently: `_apply_off_loop` compares a removal's tick with reads that started
        before it, and every read under way or to come started at or after the floor."""
        floor = min(self._in_flight, default=self._tick + 1)
        self._removed_at = {k: v for k, v in self._removed_at.items() if v >= floor}
        self._apply_started = {k: v for k, v in self._apply_started.items() if v >= floor}

    def _drop(self, note_id: str) -> None:
        self._removed_at[note_id] = self._next_tick()
        self._forget(note_id)
        self._maybe_prune()

    def _forget(self, note_id: str) -> None:
        self.index.remove_note(note_id)
        self._applied.pop(note_id, None)

    async def _apply_off_loop(
        self, note: dict[str, Any], chunks: list[dict[str, Any]], started: int
    ) -> int:
        """`_apply`, in a worker thread for a big note (building records and FTS5 rows for
        thousands of chunks would hold the event loop for seconds; the index is
        thread-safe), at once for a small one (a note is searchable once its status says
        indexed: a thread hop would widen that gap for every note).

        `started`: the tick taken before the chunks were read. A purge or trash since then
        (its removal ran at once) would be undone by this apply, and nothing would remove
        the note again (the poll cannot see a deleted document): unless an apply that
        began after that removal is putting the note back rightly, it goes."""
        note_id = str(note["_id"])
        self._apply_started[note_id] = max(self._apply_started.get(note_id, 0), started)
        if len(chunks) <= _INLINE_APPLY_CHUNKS:
            loaded = self._apply(note, chunks)
        else:
            loaded = await asyncio.to_thread(self._apply, note, chunks)
        removed = self._removed_at.get(note_id, 0)
        if removed > started and self._apply_started[note_id] < removed:
            self._forget(note_id)  # not `_drop`: this is no new removal to order applies by
            return 0
        return loaded

    async def poll_once(self, page: int = 1000) -> int:
        """Apply commits made since the last poll (by any process); returns notes seen.

        Re-reads a CLOCK_SKEW margin before the newest commit seen (another machine's clock
        may lag), then pages forward exactly; already-applied commits are skipped."""
        since = None if self._latest is None else self._latest - CLOCK_SKEW
        seen = 0
        while True:
            notes = await self._queue.indexed_since(since, page, inclusive=True)
            for note in notes:
                await self.refresh_note(note)
                stamp = note.get("indexed_at")
                if stamp is not None and (self._latest is None or as_utc(stamp) > self._latest):
                    self._latest = as_utc(stamp)
            seen += len(notes)
            last = as_utc(notes[-1]["indexed_at"]) if notes else None
            if len(notes) < page or last is None or last == since:
                return seen
            since = last

    async def start(self) -> None:
        await self.load_all()
        self._task = asyncio.create_task(self._poll_loop(), name="local-index-sync")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
        self.index.close()

    async def _poll_loop(self) -> None:
        failures = 0
        while True:
            await asyncio.sleep(self.poll_s)
            try:
                await self.poll_once()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # database outage: keep serving what we have
                failures += 1
                if failures in (1, 10, 100):
                    log.warning(
                        "search.sync_failed",
                        error=type(exc).__name__,
                        detail=str(exc)[:300],
                        failures=failures,
                        exc_info=exc,
                    )
