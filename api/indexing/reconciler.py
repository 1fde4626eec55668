"""The reconciler: brings one note's chunks to the note's desired state.

chunk → reuse embeddings whose `content_hash` is unchanged (the note's own chunks, the
author's other chunks, the embedding cache) → embed only the rest, batched → write the new
version's chunks → flip `indexed_version` (fenced by the lease) → evict the old versions
(their vectors go to the embedding cache). Readers filter on `indexed_version`, so they see the
old chunks until the flip and the new ones after it: never none, never a mix. Re-indexing
the SAME version (new chunker or model) swaps inside a transaction for the same guarantee.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

import structlog
from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import OperationFailure

from api import observability as obs
from api.chunk_store.cache import EmbeddingCacheRepository
from api.chunk_store.repository import ChunksRepository
from api.db.client import is_unavailable
from api.indexing.fairness import AuthorRotation, LeaseClaims, turn_over_check
from api.indexing.lease import (
    ReconcilerConfig,
    claim_or_hand_back,
    finish_eviction,
    hand_back,
    keep_lease,
    record_failure,
    while_unavailable,
)
from api.indexing.queue import IndexQueue, lease_expiry
from api.indexing.records import IndexOutcome, chunk_document, chunk_tags, index_fields, index_stats
from api.indexing.reuse import TurnOver, cache_evicted, vectors_for
from api.notes.stored import check_indexable, note_content, note_status, note_title
from api.notes.versioning import whole_version

log = structlog.get_logger(__name__)

# Called after a note's searchable chunks changed (the local search index listens).
IndexListener = Callable[[dict[str, Any]], Awaitable[None]]
# Entered around a note's commit and its listeners (searches wait for it to exit).
CommitScope = Callable[[dict[str, Any]], AbstractAsyncContextManager[None]]


class Reconciler:
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
            stats = await self._index(note, token, turn_over if turns else None)
        except TurnOver as handed:
            await hand_back(self.queue, note["_id"], token, handed.progress, self.config.lease_s)
            self.rotation.refresh_now()
            log.info("note.index_handed_over", **handed.progress)
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
        if stats is None:
            log.warning("note.index_lease_lost")
            if await self.queue.get(note["_id"]) is None:
                # Purged while this run wrote its chunks, after the purge had deleted the
                # note's chunks: the text of a deleted note must not wait for the sweep.
                removed = await self.chunks.delete_for_note(note["_id"])
                log.info("note.purged_chunks_removed", chunks=removed)
            return IndexOutcome(note["_id"], "lost_lease")
        return IndexOutcome(note["_id"], stats.pop("_final_status"), stats)

    async def _record_failure(
        self, note: dict[str, Any], token: str, exc: Exception
    ) -> IndexOutcome:
        gave_up, error = await record_failure(self.queue, self.config, note, token, exc)
        if is_unavailable(exc):  # its commit may have landed, reply lost: evict for it
            await finish_eviction(self.queue, self.chunks, note["_id"])
        return IndexOutcome(note["_id"], "failed" if gave_up else "pending", error=error)

    # ---- the work ---------------------------------------------------------------------
    async def _index(
        self,
        note: dict[str, Any],
        token: str,
        turn_over: Callable[[float], Awaitable[bool]] | None = None,
    ) -> dict[str, Any] | None:
        started = time.perf_counter()
        note_id, version = note["_id"], whole_version(note.get("version"))
        if note_status(note) != "active":
            return await self._remove(note, token, started)
        check_indexable(note)  # a legacy document's list content: failed at once, with why
        chunks = await asyncio.to_thread(
            self.chunker.chunk_note, note_content(note), note_title(note)
        )
        hashes = [c.content_hash for c in chunks]
        existing = await self.chunks.for_note(note_id, with_vectors=True)
        current_version = note.get("indexed_version")
        current = [d for d in existing if d["note_version"] == current_version]

        if (
            current_version == version
            and [d["content_hash"] for d in current] == hashes
            and all(d.get("embedding_model") == self.model_key for d in current)
            and note.get("chunking_version") == self.chunker.version
        ):
            # Nothing to re-embed or swap (re-queued for tags, or a no-op re-index): keep the
            # chunks, refresh the denormalised tags. (A trash or restore moves `version`,
            # so its chunks are written anew at it, from the old ones' vectors.)
            tags = chunk_tags(note)
            if any(d.get("tags") != tags for d in current):
                await self.chunks.set_tags(note_id, version, tags)
            stats = index_stats(len(chunks), 0, 0, started)
            return await self._complete(note, token, version, chunks, stats, written=0)

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
        now = datetime.now(UTC)
        docs = await asyncio.to_thread(  # thousands for a big note: off the event loop
            lambda: [
                chunk_document(
                    note, version, c, vectors[c.content_hash], model_key=self.model_key, now=now
                )
                for c in chunks
            ]
        )
        stats = index_stats(len(chunks), embedded, tokens, started, note.get("index_progress"))

        if current_version == version:  # committed in a transaction: the scope spans it
            async with self.commit_scope(note):
                return await self._swap_same_version(
                    note, token, version, chunks, docs, stats, existing
                )
        # A new version: leftovers of an interrupted attempt at this version are invisible
        # (not the indexed version) and would collide with the unique index. Unless this run
        # lost its lease and another run committed this very version since: then they are
        # that run's live chunks (deleting them left an indexed note with none).
        if not await self._may_replace(note_id, token, version, same_version=False):
            return None
        await self.chunks.delete_version(note_id, version)
        await self.chunks.insert_version(docs)
        done = await self._complete(
            note, token, version, chunks, stats, written=len(docs), evict=True
        )
        if done is None:
            await self._drop_fenced(note_id, version, docs)
        if done is not None:
            # Committed: the old version is now garbage. A database blip is retried here; a
            # process killed right now leaves `evict_pending` for the maintenance sweep.
            live = {d["content_hash"] for d in docs}
            await while_unavailable(
                "note.evict_retry",
                lambda: self._evict(note_id, version, existing, live),
                self.config.lease_s,
            )
            await self.queue.clear_eviction(note_id, version)
        return done

    async def _complete(
        self,
        note: dict[str, Any],
        token: str,
        version: int | None,
        chunks: list[Any],
        stats: dict[str, Any],
        *,
        written: int,
        session: Any = None,
        evict: bool = False,
    ) -> dict[str, Any] | None:
        now = datetime.now(UTC)
        fields = index_fields(
            version,
            len(chunks),
            stats,
            strategy=self.chunker.strategy,
            chunking_version=self.chunker.version,
            model_key=self.model_key,
        )
        if evict:  # cleared once the old versions are gone (the sweep finishes it otherwise)
            fields["evict_pending"] = True
        async with self.commit_scope(note):
            updated = await self.queue.complete(
                note["_id"], token, fields=fields, now=now, session=session
            )
            if updated is None:
                return None
            if session is None:
                await self._after_commit(note, updated, stats, now, written)
        return {**stats, "_final_status": updated["index_status"]}

    async def _after_commit(
        self,
        note: dict[str, Any],
        updated: dict[str, Any],
        stats: dict[str, Any],
        now: datetime,
        written: int,
    ) -> None:
        obs.chunks_created.add(written)
        obs.chunks_embedded.add(stats["embedded"])
        obs.chunks_reused.add(stats["reused"])
        obs.embedding_tokens.add(stats["tokens_embedded"])
        obs.index_duration.record(stats["duration_ms"])
        changed_at = note.get("changed_at")
        if changed_at is not None:
            obs.index_lag.record((now - changed_at).total_seconds() * 1000)
        log.info(
            "note.indexed",
            version=updated.get("indexed_version"),
            status=updated["index_status"],
            **stats,
        )
        for listener in self.listeners:
            await listener(updated)

    async def _swap_same_version(
        self,
        note: dict[str, Any],
        token: str,
        version: int,
        chunks: list[Any],
        docs: list[dict[str, Any]],
        stats: dict[str, Any],
        existing: list[dict[str, Any]],
    ) -> dict[str, Any] | None:
        """Replace the indexed version's chunks in one transaction (readers see old or new)."""
        client = self.db.client
        try:
            async with client.start_session() as session, await session.start_transaction():
                await self.chunks.delete_version(note["_id"], version, session=session)
                await self.chunks.insert_version(docs, session=session)
                done = await self._complete(
                    note, token, version, chunks, stats, written=len(docs), session=session
                )
                if done is None:
                    await session.abort_transaction()
                    return None
        except OperationFailure as exc:
            if exc.code not in (20, 263):  # IllegalOperation / no transactions on standalone
                raise
            log.warning("note.swap_without_transaction", error=str(exc))
            if not await self._may_replace(note["_id"], token, version, same_version=True):
                return None
            await self.chunks.delete_version(note["_id"], version)
            await self.chunks.insert_version(docs)
            done = await self._complete(note, token, version, chunks, stats, written=len(docs))
            if done is None:
                await self._drop_fenced(note["_id"], version, docs)
            else:
                await cache_evicted(self.cache, existing, keep={d["content_hash"] for d in docs})
            return done
        updated = await self.queue.get(note["_id"])
        if updated is not None:
            await self._after_commit(note, updated, stats, datetime.now(UTC), len(docs))
        await cache_evicted(self.cache, existing, keep={d["content_hash"] for d in docs})
        return done

    async def _may_replace(
        self, note_id: ObjectId, token: str, version: int, *, same_version: bool
    ) -> bool:
        """Whether this run may delete `version`'s chunks to write its own: it still holds
        its lease (nobody took the note over), and `version` is the indexed one only when
        this run re-indexes it."""
        current = await self.queue.holding(note_id, token)
        if current is None:
            return False
        return (current.get("indexed_version") == version) == same_version

    async def _drop_fenced(
        self, note_id: ObjectId, version: int, docs: list[dict[str, Any]]
    ) -> None:
        """This run lost its lease, so its commit was refused, but the chunks it wrote are
        in `note_chunks`: on a trashed note, or beside another version, nothing would ever
        remove them. Chunks older than the indexed version are never live again: delete
        them. Any others may be, or may become, the only copy of a version another run is
        committing right now (this run's delete of that version took the other run's): so
        ask for one more run of the note instead, which keeps them as that version's
        chunks, replaces them, or removes them from a trashed note. A failed note gets no
        more runs (maintenance failed it while this run wrote): this run's own chunks go,
        unless they are of the indexed version (then they may be its only copy).
        (A purged note's chunks are deleted by `_run_claimed`.)"""
        current = await self.queue.get(note_id)
        if current is None:
            return
        indexed = current.get("indexed_version")
        failed = current["index_status"] == "failed" and version != indexed
        if (indexed is not None and version < indexed) or failed:
            removed = await self.chunks.delete_ids([d["_id"] for d in docs if "_id" in d])
            log.info("note.fenced_chunks_removed", chunks=removed, version=version)
        else:
            await self.queue.recheck(note_id, datetime.now(UTC))
            log.info("note.fenced_recheck", version=version)
        # Refused may mean applied: the driver retried a commit whose reply was lost, and
        # the retry matched nothing. That commit's eviction is still to do.
        await finish_eviction(self.queue, self.chunks, note_id, current)

    async def _evict(
        self,
        note_id: ObjectId,
        keep_version: int,
        existing: list[dict[str, Any]],
        live: set[str],
    ) -> None:
        """Delete the note's older versions; vectors that leave `note_chunks` (not `live`
        in the new version) move to the embedding cache."""
        old = [d for d in existing if d["note_version"] != keep_version]
        if old:
            await cache_evicted(self.cache, old, keep=live)
        # Older versions only, and always (a run that lost its lease may have written some
        # after `existing` was read). Never a newer one: the commit released the lease, so
        # another worker may already be writing the next version.
        await self.chunks.delete_older_versions(note_id, keep_version)

    async def _remove(
        self, note: dict[str, Any], token: str, started: float
    ) -> dict[str, Any] | None:
        """A trashed note: its chunks leave the index (vectors kept in the cache).

        They are deleted before the commit, while this run holds the lease: once the note
        says `indexed`, nothing else would delete a trashed note's chunks (a process killed
        between the two would leave them for good), and the commit releases the lease, so
        a restore may already have another worker writing them back. Only the chunks read
        here are deleted, never chunks another run wrote since."""
        existing = await self.chunks.for_note(note["_id"], with_vectors=True)
        await cache_evicted(self.cache, existing, keep=set())
        await self.chunks.delete_ids([d["_id"] for d in existing])
        stats = index_stats(0, 0, 0, started)
        done = None
        try:
            done = await self._complete(note, token, None, [], stats, written=0)
        finally:
            if done is None:
                # Refused (the lease ran out), failed or cancelled: the run that took the
                # note over may have written chunks this run's delete reaches, and this run
                # cannot tell. One more run settles it.
                with contextlib.suppress(Exception):
                    recheck = self.queue.recheck(note["_id"], datetime.now(UTC))
                    await asyncio.wait_for(asyncio.shield(recheck), 2)
        return done
