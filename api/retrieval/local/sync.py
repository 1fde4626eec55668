"""Keeps a process's in-memory `LocalIndex` equal to what `note_chunks` says is searchable.

- At start-up every active note's chunks of its `indexed_version` are loaded. While a new
  generation (chunker or model) is built, users whose new index is not complete yet keep
  reading an index of their older generation (`ServingIndexes`): each note is loaded into
  every index that must hold it (`version_for`), and a user's switch (in this process:
  `switched`; elsewhere: the poll of `search_generations`) moves their pointer.
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

from api.chunk_store.generations import ServingRecords
from api.chunk_store.repository import ChunksRepository
from api.indexing.queue import IndexQueue
from api.notes.repository import NotesSearchQueries
from api.notes.stored import note_status
from api.retrieval.local.documents import chunk_record, note_meta
from api.retrieval.local.index import LocalIndex
from api.retrieval.local.serving import Serving, ServingIndexes, version_for
from api.retrieval.types import as_utc
from api.tasks import cancel_and_wait

log = structlog.get_logger(__name__)

CLOCK_SKEW = timedelta(seconds=5)


# An index, the version of a note it should hold (None: none), and that version's chunks.
Chosen = tuple[Serving, tuple[Any, int, int] | None, list[dict[str, Any]]]
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
        self,
        db: AsyncDatabase,
        index: LocalIndex,
        *,
        model_key: str,
        poll_s: float = 0.5,
        generation: str | None = None,
    ) -> None:
        """`index` holds the configured generation (`generation`, by `model_key`); without
        a generation, it holds whatever `model_key` made and no older index is kept."""
        self.index = index
        self.model_key = model_key
        self.poll_s = poll_s
        self.serving = ServingIndexes(Serving(generation, model_key, index, configured=True))
        self._chunks = ChunksRepository(db)
        self._queue = IndexQueue(db)
        self._notes = NotesSearchQueries(db)
        self._records = ServingRecords(db)
        self._latest: datetime | None = None  # newest `indexed_at` applied
        self._switches_seen: datetime | None = None  # newest `switched_at` looked at
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
        await self._load_readers()
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
        older = [s.index.stats() for s in self.serving.older()]
        log.info(
            "search.local_index_loaded",
            chunks=stats.chunks,
            notes=stats.notes,
            previous_chunks=sum(o.chunks for o in older),
            previous_notes=sum(o.notes for o in older),
            readers_of_previous=len(self.serving.readers()),
            memory_mb=round(self.serving.memory_bytes() / 2**20, 1),
        )
        return total

    async def _load_readers(self) -> None:
        """The users who read an older generation until their switch (none when this
        index does not track generations)."""
        if self.serving.configured.generation is None:
            return
        self._switches_seen = datetime.now(UTC)
        for record in await self._records.all():
            generation, model = record.get("generation"), record.get("embedding_model")
            if isinstance(generation, str) and isinstance(model, str):
                self.serving.add_reader(str(record["_id"]), generation, model)

    def _wanted(self, note: dict[str, Any]) -> list[tuple[Serving, tuple[Any, int, int] | None]]:
        """Each index that follows the note's author and must change, with the version it
        should hold. An older generation's index that holds that version already is left
        alone: its answers stay exactly what they were (tie order included)."""
        wanted = []
        for serving in self.serving.holding(str(note.get("author_id"))):
            want = version_for(note, serving)
            held = serving.index.note_version(str(note["_id"]))
            if serving.configured or want is None or held != want[1]:
                wanted.append((serving, want))
        return wanted

    async def _load_batch(self, notes: list[dict[str, Any]]) -> int:
        with self._reading() as started:
            wanted = {n["_id"]: self._wanted(n) for n in notes}
            keys = {
                (note_id, want[0], want[1])
                for note_id, pairs in wanted.items()
                for _, want in pairs
                if want is not None
            }
            found: dict[tuple[Any, Any, int], list[dict[str, Any]]] = {k: [] for k in keys}
            async for chunk in self._chunks.iter_versions(sorted(keys, key=str)):
                key = (chunk["note_id"], chunk.get("generation"), chunk["note_version"])
                found[key].append(chunk)
            loaded = 0
            for note in notes:
                chosen = [
                    (s, w, found[(note["_id"], w[0], w[1])] if w else [])
                    for s, w in wanted[note["_id"]]
                ]
                loaded += await self._apply_off_loop(note, chosen, started)
        self._maybe_prune()
        return loaded

    def _apply(self, note: dict[str, Any], chosen: list[Chosen]) -> int:
        """Replace the note in each index with its chosen version's chunks (or drop it
        from an index that should not hold it); returns the chunks put in the configured
        index."""
        note_id = str(note["_id"])
        loaded = 0
        for serving, want, chunks in chosen:
            if want is None:
                serving.index.remove_note(note_id)
                continue
            _generation, version, count = want
            usable = [c for c in chunks if c.get("embedding_model") == serving.model_key]
            if len(chunks) != count or len(usable) != len(chunks):
                continue  # superseded meanwhile, or made by another model (being re-indexed)
            records = [chunk_record(c) for c in usable]
            serving.index.replace_note(note_meta(note), version, records)
            if serving.configured:
                loaded = len(usable)
        self._applied[note_id] = (note.get("indexed_version"), note.get("indexed_at"))
        return loaded

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
            wanted = self._wanted(note)
            reads: dict[tuple[Any, int], list[dict[str, Any]]] = {}
            for _, want in wanted:
                if want is not None and (want[0], want[1]) not in reads:
                    reads[(want[0], want[1])] = await self._chunks.for_version(
                        note["_id"], want[1], generation=want[0], with_vectors=True
                    )
            chosen = [(s, w, reads[(w[0], w[1])] if w else []) for s, w in wanted]
            await self._apply_off_loop(note, chosen, started)
        self._maybe_prune()

    async def switched(self, author_id: Any, generation: str) -> None:
        """The author's search moved to `generation` (in this process: the switch's
        listener). The configured index first takes every commit up to now, then the
        pointer moves: at once for every search after it."""
        if generation != self.serving.configured.generation:
            return
        if str(author_id) not in self.serving.readers():
            return
        await self._poll_notes()
        self.serving.switch(str(author_id))

    async def _poll_switches(self) -> None:
        """Users another process switched since the last look (with the clock margin)."""
        if not self.serving.readers():
            return
        since = None if self._switches_seen is None else self._switches_seen - CLOCK_SKEW
        records = await self._records.switched_since(since)
        for record in records:
            stamp = record.get("switched_at")
            if stamp is not None and (
                self._switches_seen is None or as_utc(stamp) > self._switches_seen
            ):
                self._switches_seen = as_utc(stamp)
            if record.get("generation") == self.serving.configured.generation:
                await self.switched(record["_id"], record["generation"])

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
        for serving in [self.serving.configured, *self.serving.older()]:
            serving.index.remove_note(note_id)
        self._applied.pop(note_id, None)

    async def _apply_off_loop(
        self, note: dict[str, Any], chosen: list[Chosen], started: int
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
        if sum(len(chunks) for _, _, chunks in chosen) <= _INLINE_APPLY_CHUNKS:
            loaded = self._apply(note, chosen)
        else:
            loaded = await asyncio.to_thread(self._apply, note, chosen)
        removed = self._removed_at.get(note_id, 0)
        if removed > started and self._apply_started[note_id] < removed:
            self._forget(note_id)  # not `_drop`: this is no new removal to order applies by
            return 0
        return loaded

    async def poll_once(self, page: int = 1000) -> int:
        """Apply commits made since the last poll (by any process), then switches of users
        (each after a second look at the commits); returns notes seen."""
        seen = await self._poll_notes(page)
        await self._poll_switches()
        return seen

    async def _poll_notes(self, page: int = 1000) -> int:
        """Apply commits made since the last poll; returns notes seen.

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
                break
            since = last
        return seen

    async def start(self) -> None:
        await self.load_all()
        self._task = asyncio.create_task(self._poll_loop(), name="local-index-sync")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
        self.serving.close()

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
