"""Committing a run's version: the flip of `indexed_version` fenced by the lease (inside a
transaction when the indexed version itself is re-indexed), eviction of the older versions
(never the version the note keeps for an older generation's readers: `served`), removal of a
trashed note's chunks, and clean-up after a run whose commit was refused. `Reconciler`
(`api.indexing.reconciler`) computes the version; these are its commit steps.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import OperationFailure

from api import observability as obs
from api.chunk_store.cache import EmbeddingCacheRepository
from api.chunk_store.repository import ChunksRepository, Pinned
from api.indexing.generation import (
    Generation,
    indexed_pin,
    note_generation,
    served_expression,
    served_pin,
)
from api.indexing.lease import finish_eviction, while_unavailable
from api.indexing.queue import IndexQueue
from api.indexing.records import index_fields, index_stats
from api.indexing.reuse import cache_evicted
from api.indexing.switch import GenerationSwitch
from api.indexing.types import IndexOutcome, IndexStats, ReconcilerConfig

log = structlog.get_logger(__name__)

# Called after a note's searchable chunks changed (the local search index listens).
IndexListener = Callable[[dict[str, Any]], Awaitable[None]]
# Entered around a note's commit and its listeners (searches wait for it to exit).
CommitScope = Callable[[dict[str, Any]], AbstractAsyncContextManager[None]]


class VersionCommits:
    """The commit steps of `Reconciler`, on the attributes it sets."""

    db: AsyncDatabase
    queue: IndexQueue
    chunks: ChunksRepository
    cache: EmbeddingCacheRepository
    chunker: Any
    model_key: str
    config: ReconcilerConfig
    listeners: list[IndexListener]
    commit_scope: CommitScope
    switch: GenerationSwitch | None

    @property
    def generation(self) -> Generation:
        raise NotImplementedError

    async def _write_new_version(
        self,
        note: dict[str, Any],
        token: str,
        version: int,
        chunks: list[Any],
        docs: list[dict[str, Any]],
        stats: IndexStats,
        existing: list[dict[str, Any]],
    ) -> IndexOutcome | None:
        """Write a version that is not the indexed one, commit it, evict the older ones."""
        note_id = note["_id"]
        # Leftovers of an interrupted attempt at this version are invisible (not the indexed
        # version) and would collide with the unique index. Unless this run lost its lease
        # and another run committed this very version since: then they are that run's live
        # chunks (deleting them would leave an indexed note with none).
        if not await self._may_replace(note_id, token, version, same_version=False):
            return None
        await self.chunks.delete_version(note_id, version, generation=self.generation.key)
        await self.chunks.insert_version(docs)
        previous = self._retained_version(note, version)
        committed = await self._commit(
            note, token, version, chunks, stats, written=len(docs), evict=True, keep=previous
        )
        if committed is None:
            await self._drop_fenced(note_id, version, docs)
            return None
        done, updated = committed
        # Committed: the old versions are garbage, except one kept searchable for a while
        # (`retain_s`), which the maintenance sweep evicts once due, and the one kept for an
        # older generation's readers. A database blip is retried here; a process killed
        # right now leaves `evict_pending` for the sweep.
        live = {d["content_hash"] for d in docs}
        pin = served_pin(updated)
        await while_unavailable(
            "note.evict_retry",
            lambda: self._evict(
                note_id, previous or version, existing, live, pin, others=previous is None
            ),
            self.config.lease_s,
        )
        if previous is None:
            await self.queue.clear_eviction(note_id, version)
        return done

    def _retained_version(self, note: dict[str, Any], version: int) -> int | None:
        """The indexed version this commit replaces, when it stays searchable for a while."""
        previous = note.get("indexed_version")
        if self.config.retain_s <= 0 or previous is None or int(previous) >= version:
            return None
        return int(previous)

    async def _complete(
        self,
        note: dict[str, Any],
        token: str,
        version: int | None,
        chunks: list[Any],
        stats: IndexStats,
        *,
        written: int,
        session: Any = None,
        evict: bool = False,
        keep: int | None = None,
    ) -> IndexOutcome | None:
        """Commit the run (fenced by its lease): the note's index fields, then (outside a
        transaction) metrics and listeners. None when the lease was lost."""
        committed = await self._commit(
            note,
            token,
            version,
            chunks,
            stats,
            written=written,
            session=session,
            evict=evict,
            keep=keep,
        )
        return None if committed is None else committed[0]

    async def _commit(
        self,
        note: dict[str, Any],
        token: str,
        version: int | None,
        chunks: list[Any],
        stats: IndexStats,
        *,
        written: int,
        session: Any = None,
        evict: bool = False,
        keep: int | None = None,
    ) -> tuple[IndexOutcome, dict[str, Any]] | None:
        """`_complete`, also returning the note as committed."""
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
        if keep is not None:  # searchable until then (atlas_pipelines.current_version_guard)
            fields["previous_indexed_version"] = keep
            fields["evict_after"] = now + timedelta(seconds=self.config.retain_s)
        computed = {}
        if self.config.blue_green or version is None:
            prior = note_generation(note)
            computed["served"] = served_expression(self.generation, version, prior)
        async with self.commit_scope(note):
            updated = await self.queue.complete(
                note["_id"], token, fields=fields, now=now, session=session, computed=computed
            )
            if updated is None:
                return None
            if session is None:
                await self._after_commit(note, updated, stats, now, written)
        return IndexOutcome(note["_id"], updated["index_status"], stats), updated

    async def _after_commit(
        self,
        note: dict[str, Any],
        updated: dict[str, Any],
        stats: IndexStats,
        now: datetime,
        written: int,
    ) -> None:
        obs.chunks_created.add(written)
        obs.chunks_embedded.add(stats.embedded)
        obs.chunks_reused.add(stats.reused)
        obs.embedding_tokens.add(stats.tokens_embedded)
        obs.index_duration.record(stats.duration_ms)
        changed_at = note.get("changed_at")
        if changed_at is not None:
            obs.index_lag.record((now - changed_at).total_seconds() * 1000)
        log.info(
            "note.indexed",
            version=updated.get("indexed_version"),
            status=updated["index_status"],
            **stats.as_document(),
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
        stats: IndexStats,
        existing: list[dict[str, Any]],
    ) -> IndexOutcome | None:
        """Replace the indexed version's chunks in one transaction (readers see old or new)."""
        client = self.db.client
        try:
            async with client.start_session() as session, await session.start_transaction():
                await self.chunks.delete_version(
                    note["_id"], version, session=session, generation=self._swapped(note)
                )
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
            return await self._swap_without_transaction(
                note, token, version, chunks, docs, stats, existing
            )
        updated = await self.queue.get(note["_id"])
        if updated is not None:
            await self._after_commit(note, updated, stats, datetime.now(UTC), len(docs))
        await cache_evicted(self.cache, existing, keep={d["content_hash"] for d in docs})
        return done

    async def _swap_without_transaction(
        self,
        note: dict[str, Any],
        token: str,
        version: int,
        chunks: list[Any],
        docs: list[dict[str, Any]],
        stats: IndexStats,
        existing: list[dict[str, Any]],
    ) -> IndexOutcome | None:
        """The same swap on a server without transactions: delete, insert, then commit
        fenced by the lease (readers may see the version's chunks missing in between)."""
        if not await self._may_replace(note["_id"], token, version, same_version=True):
            return None
        await self.chunks.delete_version(note["_id"], version, generation=self._swapped(note))
        await self.chunks.insert_version(docs)
        done = await self._complete(note, token, version, chunks, stats, written=len(docs))
        if done is None:
            await self._drop_fenced(note["_id"], version, docs)
        else:
            await cache_evicted(self.cache, existing, keep={d["content_hash"] for d in docs})
        return done

    def _swapped(self, note: dict[str, Any]) -> str | None:
        """The generation whose chunks a swap replaces: this one (a repair), or, without
        blue/green, every generation of the version (None)."""
        if note_generation(note) == self.generation.key:
            return self.generation.key
        return None

    async def _may_replace(
        self, note_id: ObjectId, token: str, version: int, *, same_version: bool
    ) -> bool:
        """Whether this run may delete `version`'s chunks to write its own: it still holds
        its lease (nobody took the note over), and `version` is the indexed one (of this
        generation, with blue/green) only when this run re-indexes it."""
        current = await self.queue.holding(note_id, token)
        if current is None:
            return False
        indexed = current.get("indexed_version") == version
        if self.config.blue_green and not same_version:
            indexed = indexed_pin(current) == (self.generation.key, version)
        return indexed == same_version

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
        pin: Pinned | None = None,
        *,
        others: bool = True,
    ) -> None:
        """Delete the note's versions older than `keep_version`, and (`others`) other
        generations' chunks up to it, but never `pin` (kept for an older generation's
        readers); vectors not `live` in the new version move to the embedding cache (a
        retained version's too, now)."""
        if existing:
            pinned = [d for d in existing if (d.get("generation"), d["note_version"]) != pin]
            await cache_evicted(self.cache, pinned, keep=live)
        # Older versions only, and always (a run that lost its lease may have written some
        # after `existing` was read). Never a newer one: the commit released the lease, so
        # another worker may already be writing the next version.
        if pin is None:
            await self.chunks.delete_older_versions(note_id, keep_version)
        else:
            await self.chunks.delete_older_versions(note_id, keep_version, pin)
        if others:
            await self.chunks.delete_other_generations(
                note_id, self.generation.key, keep_version, pin
            )

    async def _remove(
        self, note: dict[str, Any], token: str, started: float
    ) -> IndexOutcome | None:
        """A trashed note: its chunks leave the index (vectors kept in the cache).

        They are deleted before the commit, while this run holds the lease: once the note
        says `indexed`, nothing else would delete a trashed note's chunks (a process killed
        between the two would leave them for good), and the commit releases the lease, so
        a restore may already have another worker writing them back. Only the chunks read
        here are deleted, never chunks another run wrote since."""
        existing = await self.chunks.for_note(note["_id"], with_vectors=True)
        await cache_evicted(self.cache, existing, keep=set())
        await self.chunks.delete_ids([d["_id"] for d in existing])  # `served` ones too
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
