"""Switching each user's search to a new generation once their new index is complete.

- `prepare()` (start-up, before the search index loads and before any run): users whose
  notes are indexed in another generation get a `search_generations` record reading it
  (their search stays there meanwhile), the switch's progress counters start, and the cost
  is logged (`index.generation_change`).
- After each run that re-indexed a note of such a user, and in the maintenance loop,
  `check(author)` asks whether any active note of theirs still lacks the configured
  generation; when none does, the record moves to it in one atomic write (the per-process
  search indexes follow: `on_switch` listeners here, a poll elsewhere), then the old
  generation's chunks of that user are dropped (`cleanup`; vectors to the embedding cache)
  and their notes forget what they kept for it.
Nothing else drops chunks a `served` field names before that switch.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import structlog
from pymongo.asynchronous.database import AsyncDatabase

from api.chunk_store.cache import EmbeddingCacheRepository
from api.chunk_store.generations import ServingRecords
from api.chunk_store.repository import ChunksRepository
from api.indexing.generation import Generation
from api.indexing.reuse import cache_evicted
from api.indexing.switch_estimate import ChangeEstimate, Pricing, SwitchProgress, status_document
from api.indexing.switch_queries import SwitchQueries
from api.tasks import cancel_and_wait

log = structlog.get_logger(__name__)

SwitchListener = Callable[[Any, str], Awaitable[None]]
# Asked before a start-up begins re-indexing into a new generation; raises `StartupError`
# to refuse (`autonote serve` and `worker` ask on a terminal unless --yes).
ReindexGate = Callable[[ChangeEstimate], Awaitable[None]]
# A check after a commit waits this long at least, and ten times what the last check of
# that user took (a user with many notes left reads them all on the embedded server).
CHECK_DEBOUNCE_S = 1.0


class GenerationSwitch:
    """One process's view of who is switching to `target`, and the switch itself."""

    def __init__(
        self,
        db: AsyncDatabase,
        target: Generation,
        *,
        pricing: Pricing | None = None,
    ) -> None:
        self.target = target
        self.pricing = pricing or Pricing(None, 0.0)
        self.records = ServingRecords(db)
        self.notes = SwitchQueries(db)
        self.chunks = ChunksRepository(db)
        self.cache = EmbeddingCacheRepository(db)
        self.switching: dict[Any, str] = {}  # author → the generation their search reads
        self.on_switch: list[SwitchListener] = []
        self._checks: dict[Any, asyncio.Task[None]] = {}
        self._again: set[Any] = set()
        self._check_s: dict[Any, float] = {}

    # ---- start-up ----------------------------------------------------------------------
    async def _changed(self) -> bool:
        """Whether any chunk is of another generation than the target."""
        return any(g != self.target.key for g in await self.chunks.generations())

    async def estimate(self) -> ChangeEstimate | None:
        """What re-indexing into the target will cost, without writing anything; None when
        nothing is to be re-indexed."""
        if not await self._changed():
            return None
        authors = await self.notes.by_author(self.target.key)
        tokens = await self.chunks.tokens_by_author(self.target.key)
        return await self._estimate(authors, tokens)

    async def _estimate(
        self, authors: dict[Any, dict[str, Any]], tokens: dict[Any, dict[str, int]]
    ) -> ChangeEstimate | None:
        records = {r["_id"]: r for r in await self.records.all()}
        estimate = ChangeEstimate(target=self.target.as_serving(), pricing=self.pricing)
        now = datetime.now(UTC)
        sources: dict[str, dict[str, Any]] = {}
        for author, entry in authors.items():
            if entry["lacking"] == 0:
                continue
            estimate.users += 1
            estimate.notes += entry["lacking"]
            for source in entry["generations"]:
                if source["generation"] != self.target.key:
                    sources[source["generation"]] = source
            switch = (records.get(author) or {}).get("switch") or {}
            if switch.get("target") == self.target.key:
                estimate.progress.add_record(switch, now)
            else:
                estimate.progress.tokens_estimate += tokens.get(author, {}).get("tokens", 0)
        estimate.sources = list(sources.values())
        return estimate if estimate.notes else None

    async def prepare(self, gate: ReindexGate | None = None) -> ChangeEstimate | None:
        """Record which generation each user's search reads until their switch, start or
        resume the progress counters, log the cost; returns the estimate (None: nothing to
        re-index). `gate` sees the estimate first and may refuse (`StartupError`): then
        nothing is written."""
        estimate = None
        if await self._changed():
            authors = await self.notes.by_author(self.target.key)
            tokens = await self.chunks.tokens_by_author(self.target.key)
            estimate = await self._estimate(authors, tokens)
            if estimate is not None:
                log.info("index.generation_change", **estimate.as_log())
                if gate is not None:
                    await gate(estimate)
            await self._ensure_records(authors, tokens)
        await self.load()
        return estimate

    async def _ensure_records(
        self, authors: dict[Any, dict[str, Any]], tokens: dict[Any, dict[str, int]]
    ) -> None:
        """A user whose notes are mostly indexed in another generation reads it until their
        switch (the first process to start after a change decides, before any run)."""
        now = datetime.now(UTC)
        for author, entry in authors.items():
            if author is None or not entry["generations"]:
                continue
            main = max(entry["generations"], key=lambda g: g["notes"])
            if main["generation"] != self.target.key:
                fields = ("generation", "embedding_model", "chunking_version")
                await self.records.ensure(author, {k: main[k] for k in fields})
            record = await self.records.get(author)
            if record is None or record.get("generation") == self.target.key:
                continue
            switch = record.get("switch") or {}
            if switch.get("target") == self.target.key:  # a restart resumes it
                await self._resume(author, switch, now)
                continue
            await self.records.start_switch(
                author,
                {
                    "target": self.target.key,
                    "embedding_model": self.target.model_key,
                    "chunking_version": self.target.chunking_version,
                    "started_at": now,
                    "notes_total": entry["lacking"],
                    "tokens_estimate": tokens.get(author, {}).get("tokens", 0),
                    "notes_done": 0,
                    "tokens_embedded": 0,
                    "estimate_done": 0,
                },
            )

    async def _resume(self, author: Any, switch: dict[str, Any], now: datetime) -> None:
        await self.records.collection.update_one(
            {"_id": author, "switch.target": self.target.key},
            {
                "$set": {
                    "switch.resumed_at": now,
                    "switch.resumed_tokens": switch.get("tokens_embedded", 0),
                    "switch.resumed_notes": switch.get("notes_done", 0),
                }
            },
        )

    async def load(self) -> dict[Any, str]:
        """Read who reads which generation (every record not at the target)."""
        self.switching = {
            r["_id"]: r["generation"]
            for r in await self.records.all()
            if r.get("generation") not in (None, self.target.key)
        }
        return self.switching

    # ---- after runs ----------------------------------------------------------------------
    async def committed(
        self, author_id: Any, *, crossed: bool, tokens: int = 0, estimate: int = 0
    ) -> None:
        """A run committed a note of `author_id` (`crossed`: into the target from another
        generation, having embedded `tokens` for old chunks of `estimate` tokens)."""
        if author_id not in self.switching:
            return
        if crossed:
            await self.records.add_progress(
                author_id, self.target.key, notes=1, tokens=tokens, estimate=estimate
            )
        if author_id in self._checks:
            self._again.add(author_id)
            return
        self._checks[author_id] = asyncio.create_task(
            self._check_soon(author_id), name="generation-switch-check"
        )

    async def _check_soon(self, author_id: Any) -> None:
        try:
            while True:
                await asyncio.sleep(max(CHECK_DEBOUNCE_S, 10 * self._check_s.get(author_id, 0)))
                self._again.discard(author_id)
                with contextlib.suppress(Exception):  # the maintenance loop checks again
                    await self.check(author_id)
                if author_id not in self._again or author_id not in self.switching:
                    return
        finally:
            self._checks.pop(author_id, None)

    async def check(self, author_id: Any) -> bool:
        """Switch the author's search to the target if their new index is complete;
        whether it switched."""
        source = self.switching.get(author_id)
        if source is None:
            return False
        started = time.monotonic()
        incomplete = await self.notes.incomplete(author_id, self.target.key)
        self._check_s[author_id] = time.monotonic() - started
        if incomplete:
            return False
        if await self.records.switch(author_id, source, self.target.as_serving()):
            log.info(
                "search.generation_switched",
                author_id=str(author_id),
                previous=source,
                generation=self.target.key,
                embedding_model=self.target.model_key,
            )
        self.switching.pop(author_id, None)
        record = await self.records.get(author_id)
        if record is None or record.get("generation") != self.target.key:
            return False  # moved elsewhere meanwhile (another process, another setting)
        for listener in self.on_switch:
            await listener(author_id, self.target.key)
        await self.cleanup(author_id)
        return True

    async def cleanup(self, author_id: Any) -> int:
        """Drop the author's chunks of other generations (vectors to their embedding cache)
        and what their notes kept for them; returns the chunks deleted. Only for a user
        whose search reads the target."""
        deleted = 0
        async for docs in self.chunks.iter_other_generations(author_id, self.target.key):
            await cache_evicted(self.cache, docs, keep=set())
            deleted += await self.chunks.delete_ids([d["_id"] for d in docs])
        await self.notes.clear_served(author_id)
        await self.records.clear_cleanup(author_id, self.target.key)
        if deleted:
            log.info("search.old_generation_dropped", author_id=str(author_id), chunks=deleted)
        return deleted

    async def maintain(self, *, sweep: bool = False) -> int:
        """Check every switching user, finish clean-ups a crash interrupted; with `sweep`,
        also drop what notes keep for a generation nobody reads any more. Returns the
        users switched."""
        await self.load()
        switched = 0
        for author in list(self.switching):
            switched += await self.check(author)
        for record in await self.records.cleanups():
            if record.get("generation") == self.target.key:
                await self.cleanup(record["_id"])
        if sweep:
            for author in await self.notes.authors_with_served():
                if author not in self.switching:
                    await self.cleanup(author)
        return switched

    async def close(self) -> None:
        await cancel_and_wait(list(self._checks.values()))

    # ---- status ----------------------------------------------------------------------------
    async def status(self, author_id: Any | None) -> dict[str, Any]:
        """Progress of the author's switch (everyone's for None)."""
        counts = await self.notes.counts(author_id, self.target.key)
        now = datetime.now(UTC)
        progress = SwitchProgress()
        serving = self.target.as_serving()
        records = (
            [r for r in [await self.records.get(author_id)] if r is not None]
            if author_id is not None
            else await self.records.all()
        )
        switching = 0
        for record in records:
            switch = record.get("switch") or {}
            if switch.get("target") == self.target.key:
                progress.add_record(switch, now)
            if record.get("generation") != self.target.key:
                switching += 1
                serving = {
                    k: record.get(k) for k in ("generation", "embedding_model", "chunking_version")
                }
        doc = status_document(
            target=self.target.as_serving(),
            serving=serving,
            counts=counts,
            progress=progress,
            pricing=self.pricing,
        )
        if author_id is None:  # everyone: how many users still read an older generation
            doc["switching"], doc["users_switching"] = switching > 0, switching
            doc.pop("serving")
        return doc
