"""The reconciler: brings one note's chunks to the note's desired state.

chunk → reuse embeddings whose `content_hash` is unchanged (the note's own chunks, the
author's other chunks, the embedding cache) → embed only the rest, batched → write the new
version's chunks → flip `indexed_version` (fenced by the lease) → evict the old versions
(their vectors go to the embedding cache). Readers filter on `indexed_version`, so they see the
old chunks until the flip and the new ones after it: never none, never a mix. A new chunker
or model is a new *generation*: its chunks are written beside the old generation's, which
the commit keeps for that generation's readers (`served`) until the user switches
(`api.indexing.switch`). Re-indexing the same version of the same generation (a repair)
swaps inside a transaction for the same guarantee.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import structlog
from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from api.chunk_store.cache import EmbeddingCacheRepository
from api.chunk_store.repository import ChunksRepository
from api.db.client import is_unavailable
from api.indexing.claims import lease_expiry
from api.indexing.commit import CommitScope, IndexListener, VersionCommits
from api.indexing.fairness import AuthorRotation, LeaseClaims, turn_over_check
from api.indexing.generation import Generation, indexed_pin, note_generation, served_pin
from api.indexing.lease import (
    claim_or_hand_back,
    finish_eviction,
    hand_back,
    keep_lease,
    record_failure,
)
from api.indexing.queue import IndexQueue
from api.indexing.records import chunk_document, chunk_tags, index_stats
from api.indexing.reuse import TurnOver, TurnOverCheck, vectors_for
from api.indexing.switch import GenerationSwitch
from api.indexing.types import IndexOutcome, Progress, ReconcilerConfig
from api.notes.stored import (
    as_datetime,
    check_indexable,
    note_content,
    note_status,
    note_title,
    note_updated_at,
)
from api.notes.versioning import whole_version

log = structlog.get_logger(__name__)


class Reconciler(VersionCommits):
    """Indexes claimed notes. One instance per process; safe to run many concurrently."""

    def __init__(
        self,
        db: AsyncDatabase,
        *,
        chunker: Any,
        embedder: Any,
        model_key: str,
        config: ReconcilerConfig,
        listeners: list[IndexListener] | None = None,
        commit_scope: CommitScope | None = None,
        switch: GenerationSwitch | None = None,
    ) -> None:
        self.db = db
        self.queue = IndexQueue(db)
        self.chunks = ChunksRepository(db)
        self.cache = EmbeddingCacheRepository(db)
        self.chunker = chunker
        self.embedder = embedder
        self.model_key = model_key
        self.config = config
        self.listeners = listeners or []
        self.commit_scope = commit_scope or (lambda _note: contextlib.nullcontext())
        self.worker_id = uuid.uuid4().hex[:12]
        self.rotation = AuthorRotation()
        self.switch = switch

    @property
    def generation(self) -> Generation:
        """What this reconciler's chunks are stamped with: its chunker and model."""
        return Generation(self.chunker.version, self.model_key)

    # ---- queue side -------------------------------------------------------------------
    async def run_once(self, note_id: ObjectId | None = None) -> IndexOutcome | None:
        """Claim one due note (or `note_id`) and index it; None when nothing is claimable."""
        token = f"{self.worker_id}:{uuid.uuid4().hex[:12]}"
        now = datetime.now(UTC)

        lease_s = self.config.lease_s
        claims = LeaseClaims(self.queue, token, now, lease_s, self.config.max_attempts)
        note = await claim_or_hand_back(
            self.queue,
            claims.any(note_id) if note_id is not None else self.rotation.claim(claims),
            token,
            lease_expiry(now, lease_s),
            lease_s,
        )
        if note is None:
            return None
        structlog.contextvars.bind_contextvars(job_id=token, note_id=str(note["_id"]))
        try:
            return await self._run_claimed(note, token, turns=note_id is None)
        finally:
            structlog.contextvars.unbind_contextvars("job_id", "note_id")

    async def _run_claimed(self, note: dict[str, Any], token: str, *, turns: bool) -> IndexOutcome:
        """`turns`: the run may hand its worker to another user's note (not when a caller
        waits for this very note: synchronous indexing)."""
        heartbeat = asyncio.create_task(
            keep_lease(self.queue, note["_id"], token, self.config.lease_s)
        )
        turn_over = turn_over_check(self.queue, note.get("author_id"), self.config.turn_s)
        try:
            outcome = await self._index(note, token, turn_over if turns else None)
        except TurnOver as handed:
            await hand_back(self.queue, note["_id"], token, handed.progress, self.config.lease_s)
            self.rotation.refresh_now()
            log.info("note.index_handed_over", **handed.progress.as_document())
            return IndexOutcome(note["_id"], "handed_over")
        except asyncio.CancelledError:
            # Shutdown: hand the note back so another worker can take it at once (if this
            # fails, the lease simply expires). Chunks of the unfinished version are
            # invisible leftovers the next run replaces.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self.queue.release(note["_id"], token)), 2)
            raise
        except Exception as exc:  # every failure is recorded on the note, never lost
            return await self._record_failure(note, token, exc)
        finally:
            heartbeat.cancel()
        return outcome if outcome is not None else await self._lost_lease(note)

    async def _lost_lease(self, note: dict[str, Any]) -> IndexOutcome:
        log.warning("note.index_lease_lost")
        if await self.queue.get(note["_id"]) is None:
            # Purged while this run wrote its chunks, after the purge had deleted the
            # note's chunks: the text of a deleted note must not wait for the sweep.
            removed = await self.chunks.delete_for_note(note["_id"])
            log.info("note.purged_chunks_removed", chunks=removed)
        return IndexOutcome(note["_id"], "lost_lease")

    async def _record_failure(
        self, note: dict[str, Any], token: str, exc: Exception
    ) -> IndexOutcome:
        gave_up, error = await record_failure(self.queue, self.config, note, token, exc)
        if is_unavailable(exc):  # its commit may have landed, reply lost: evict for it
            await finish_eviction(self.queue, self.chunks, note["_id"])
        return IndexOutcome(note["_id"], "failed" if gave_up else "pending", error=error)

    # ---- the work ---------------------------------------------------------------------
    async def _index(
        self, note: dict[str, Any], token: str, turn_over: TurnOverCheck | None = None
    ) -> IndexOutcome | None:
        """Chunk the note, reuse or embed its vectors, write and commit its version; None
        when the lease was lost. A committed run is counted by the generation switch."""
        existing: list[dict[str, Any]] = []
        done = await self._reindex(note, token, existing, turn_over)
        if done is not None and self.switch is not None:
            await self._count_switch(note, existing, done)
        return done

    async def _count_switch(
        self, note: dict[str, Any], existing: list[dict[str, Any]], done: IndexOutcome
    ) -> None:
        """Tell the switch a note of its author committed (and, re-indexed from another
        generation, what it cost against the old chunks' tokens)."""
        assert self.switch is not None
        crossed = note_status(note) == "active" and note_generation(note) not in (
            None,
            self.generation.key,
        )
        old = indexed_pin(note)
        estimate = sum(
            int(d.get("token_count") or 0)
            for d in existing
            if (d.get("generation"), d["note_version"]) == old
        )
        tokens = done.stats.tokens_embedded if done.stats is not None else 0
        await self.switch.committed(
            note.get("author_id"), crossed=crossed, tokens=tokens, estimate=estimate
        )

    async def _reindex(
        self,
        note: dict[str, Any],
        token: str,
        existing: list[dict[str, Any]],
        turn_over: TurnOverCheck | None,
    ) -> IndexOutcome | None:
        """`_index`'s work; the note's stored chunks are added to `existing`."""
        started = time.perf_counter()
        version = whole_version(note.get("version"))
        if note_status(note) != "active":
            return await self._remove(note, token, started)
        check_indexable(note)  # a legacy document's list content: failed at once, with why
        chunks = await asyncio.to_thread(
            self.chunker.chunk_note, note_content(note), note_title(note)
        )
        existing.extend(await self.chunks.for_note(note["_id"], with_vectors=True))
        current = self._current(note, version, existing)
        if current is not None and self._unchanged(chunks, current):
            return await self._refresh_tags(note, token, version, chunks, current, started)
        vectors, embedded, tokens = await vectors_for(
            note,
            chunks,
            existing,
            embedder=self.embedder,
            model_key=self.model_key,
            cache=self.cache,
            stored=self.chunks,
            turn_over=turn_over,
        )
        docs = await self._documents(note, version, chunks, vectors)
        carried = Progress.from_document(note.get("index_progress"))
        stats = index_stats(len(chunks), embedded, tokens, started, carried)
        if self._swaps(note, version):  # in a transaction: the scope spans it
            async with self.commit_scope(note):
                return await self._swap_same_version(
                    note, token, version, chunks, docs, stats, existing
                )
        return await self._write_new_version(note, token, version, chunks, docs, stats, existing)

    def _swaps(self, note: dict[str, Any], version: int) -> bool:
        """Whether the run replaces the indexed version's chunks in place: a repair of this
        generation's; or, without blue/green (Atlas), another generation's of the same
        version. Otherwise its chunks go beside them."""
        if note.get("indexed_version") != version:
            return False
        return not self.config.blue_green or note_generation(note) == self.generation.key

    def _current(
        self, note: dict[str, Any], version: int, existing: list[dict[str, Any]]
    ) -> list[dict[str, Any]] | None:
        """The chunks of `version` in this generation when the note has them as its indexed
        version (or as the version it keeps for an older generation's readers: a change
        undone during a change), else None."""
        pin = (self.generation.key, version)
        if pin not in (indexed_pin(note), served_pin(note)):
            return None
        return [d for d in existing if (d.get("generation"), d["note_version"]) == pin]

    def _unchanged(self, chunks: list[Any], current: list[dict[str, Any]]) -> bool:
        """Nothing to re-embed or swap (re-queued for tags, or a no-op re-index): the
        version's chunks in this generation are these. (A trash or restore moves
        `version`, so its chunks are written anew at it, from the old ones' vectors.)"""
        return [d["content_hash"] for d in current] == [c.content_hash for c in chunks] and all(
            d.get("embedding_model") == self.model_key for d in current
        )

    async def _refresh_tags(
        self,
        note: dict[str, Any],
        token: str,
        version: int,
        chunks: list[Any],
        current: list[dict[str, Any]],
        started: float,
    ) -> IndexOutcome | None:
        """Keep the indexed chunks, refresh the note fields they copy, and commit."""
        tags, updated_at = chunk_tags(note), note_updated_at(note)
        if any(
            d.get("tags") != tags or as_datetime(d.get("note_updated_at")) != updated_at
            for d in current
        ):
            await self.chunks.set_note_fields(note["_id"], version, tags, updated_at)
        stats = index_stats(len(chunks), 0, 0, started)
        done = await self._complete(note, token, version, chunks, stats, written=0)
        if done is not None and note_generation(note) != self.generation.key:
            # Taken back from what the note kept for an older generation: the generation it
            # was indexed in until now is garbage.
            await self.chunks.delete_other_generations(note["_id"], self.generation.key, version)
        return done

    async def _documents(
        self, note: dict[str, Any], version: int, chunks: list[Any], vectors: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """The version's `note_chunks` documents (thousands for a big note: built off the
        event loop)."""
        now = datetime.now(UTC)
        generation = self.generation.key
        return await asyncio.to_thread(
            lambda: [
                chunk_document(
                    note,
                    version,
                    c,
                    vectors[c.content_hash],
                    model_key=self.model_key,
                    now=now,
                    generation=generation,
                )
                for c in chunks
            ]
        )
