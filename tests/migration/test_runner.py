"""The runner around the reconciler: a note still leased by a dead run is set aside, the
rest proceed, and it is indexed once its lease runs out; notes trashed or purged after
they were enqueued are skipped, not counted as indexed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from api.config import Settings
from api.indexing.runtime import build_indexing
from api.migration.repository import MigrationNotes
from api.migration.runner import MigrationRunner
from api.migration.selection import Selection
from api.migration.types import MigrationSummary
from api.providers import build_chunker, build_embedder, embedding_model_key
from tests.migration.support import check_all_indexed, chunker_for, insert_legacy, run_in_process


async def test_a_dead_runs_lease_does_not_block_the_others(
    settings: Settings, db: AsyncDatabase
) -> None:
    ids = await insert_legacy(db, 6, [ObjectId()])
    until = datetime.now(UTC) + timedelta(seconds=3)
    # What a SIGKILLed run leaves: claimed, lease running, no worker alive to extend it.
    await db.notes.update_one(
        {"_id": ids[0]},
        {
            "$set": {
                "version": 1,
                "index_status": "indexing",
                "lease_token": "dead:1",
                "lease_expires_at": until,
                "index_attempts": 1,
                "next_attempt_at": until,
            }
        },
    )
    code, run = await run_in_process(settings, concurrency=1)
    assert code == 0, run
    assert (run["selected"], run["indexed"]) == (6, 6)
    await check_all_indexed(db, chunker_for(settings), ids)
    notes = {n["_id"]: n async for n in db.notes.find({})}
    leased = notes[ids[0]]
    assert leased["indexed_at"] >= until, "waited for the lease to expire"
    assert all(notes[i]["indexed_at"] < leased["indexed_at"] for i in ids[1:]), (
        "the one loop did not sit waiting on the leased note"
    )


class TrashAfterEnqueue(MigrationNotes):
    """The real queries; right after the batch is enqueued, a user trashes one note and
    purges another (what the API may do at any moment)."""

    def __init__(self, db: AsyncDatabase, trash: ObjectId, purge: ObjectId) -> None:
        super().__init__(db)
        self.trash, self.purge = trash, purge

    async def enqueue(
        self, ids: list[ObjectId], selection: Selection, now: datetime, **kw: Any
    ) -> int:
        n = await super().enqueue(ids, selection, now, **kw)
        await self.collection.update_one({"_id": self.trash}, {"$set": {"status": "trashed"}})
        await self.collection.delete_one({"_id": self.purge})
        return n


async def test_notes_trashed_or_purged_mid_run_are_skipped(
    settings: Settings, db: AsyncDatabase
) -> None:
    ids = await insert_legacy(db, 4, [ObjectId()])
    embedder = build_embedder(settings, None)
    chunker = build_chunker(settings, embedder)
    indexing = build_indexing(settings, db, chunker=chunker, embedder=embedder, concurrency=2)
    selection = Selection(chunker.version, embedding_model_key(embedder))
    notes = TrashAfterEnqueue(db, trash=ids[1], purge=ids[2])
    stats = await MigrationRunner(indexing.reconciler, notes, selection, concurrency=2).run()
    await embedder.aclose()
    assert (stats.selected, stats.done, stats.indexed, stats.skipped) == (4, 4, 2, 2)
    assert stats.skip_reasons == {"trashed": 1, "deleted": 1}
    assert MigrationSummary(stats, 1.0).exit_code == 0
    await check_all_indexed(db, chunker, [ids[0], ids[3]])
    assert await db.note_chunks.count_documents({"note_id": {"$in": ids[1:3]}}) == 0


async def test_a_string_version_is_indexed_once_not_on_every_run(
    settings: Settings, db: AsyncDatabase
) -> None:
    ids = await insert_legacy(db, 3, [ObjectId()])
    await db.notes.update_one({"_id": ids[0]}, {"$set": {"version": "3"}})
    code, first = await run_in_process(settings, concurrency=1)
    assert code == 0 and (first["selected"], first["indexed"]) == (3, 3), first
    note = await db.notes.find_one({"_id": ids[0]})
    assert (note["version"], note["indexed_version"]) == (3, 3)
    await check_all_indexed(db, chunker_for(settings), ids)
    code, second = await run_in_process(settings, concurrency=1)
    assert code == 0 and second["selected"] == 0, second


async def test_lost_chunks_are_rebuilt_by_check_repair_then_migrate(
    settings: Settings, db: AsyncDatabase
) -> None:
    """The migration trusts each note's index fields, so after `note_chunks` lost documents
    behind its back it selects nothing. The documented path (also the duplicate-chunks
    hint's): `autonote check --repair` re-queues those notes, and the migration rebuilds."""
    from api.cli.check import expectations
    from api.integrity import IntegrityChecker

    ids = await insert_legacy(db, 6, [ObjectId(), ObjectId()])
    code, first = await run_in_process(settings, concurrency=2)
    assert code == 0 and first["indexed"] == 6
    await db.note_chunks.delete_many({})
    code, blind = await run_in_process(settings)
    assert code == 0 and blind["selected"] == 0
    checker = IntegrityChecker(db, expectations(settings), settle_s=0)
    report = await checker.run()
    assert {f.note_id for f in report.findings if f.kind == "chunk_count"} == set(ids)
    await checker.repair(report)
    code, rebuilt = await run_in_process(settings, concurrency=2)
    assert code == 0 and rebuilt["indexed"] == 6, rebuilt
    await check_all_indexed(db, chunker_for(settings), ids)
    assert (await checker.run()).findings == []


async def test_notes_another_worker_indexed_first_are_accounted_for(
    settings: Settings, db: AsyncDatabase
) -> None:
    """Counted as selected, then indexed by the API's workers before the run's pages got to
    them: they are in a total (`left_selection`), so done + left = selected."""
    ids = await insert_legacy(db, 5, [ObjectId()])
    embedder = build_embedder(settings, None)
    chunker = build_chunker(settings, embedder)
    indexing = build_indexing(settings, db, chunker=chunker, embedder=embedder, concurrency=1)
    reconciler = indexing.reconciler

    class OtherWorkerFirst(MigrationNotes):
        async def id_range(self, selection: Selection) -> Any:
            for note_id in ids[:2]:  # what an API worker does between count and paging
                await self.collection.update_one(
                    {"_id": note_id},
                    {
                        "$set": {
                            "version": 1,
                            "index_status": "pending",
                            "index_attempts": 0,
                            "next_attempt_at": datetime.now(UTC),
                        }
                    },
                )
                assert (await reconciler.run_once(note_id)) is not None
            return await super().id_range(selection)

    selection = Selection(chunker.version, embedding_model_key(embedder))
    stats = await MigrationRunner(reconciler, OtherWorkerFirst(db), selection).run()
    await embedder.aclose()
    assert (stats.selected, stats.done, stats.left_selection) == (5, 3, 2)
    summary = MigrationSummary(stats, 1.0)
    assert summary.as_dict()["left_selection"] == 2 and summary.exit_code == 0
    await check_all_indexed(db, chunker, ids)


async def test_notes_edited_into_the_selection_mid_run_are_accounted_for(
    settings: Settings, db: AsyncDatabase
) -> None:
    """Pages re-run the selection, so notes edited into it between the count and the pages
    are migrated too: they are counted in `joined_selection`, so `done` never passes
    `selected` without a word."""
    author = ObjectId()
    first = await insert_legacy(db, 4, [author])
    code, _ = await run_in_process(settings, concurrency=1)
    assert code == 0
    later = await insert_legacy(db, 3, [author], start=4)
    embedder = build_embedder(settings, None)
    chunker = build_chunker(settings, embedder)
    indexing = build_indexing(settings, db, chunker=chunker, embedder=embedder, concurrency=1)

    class EditedMeanwhile(MigrationNotes):
        async def id_range(self, selection: Selection) -> Any:
            # What an API edit does to two indexed notes after the run counted its notes.
            await self.collection.update_many(
                {"_id": {"$in": first[:2]}},
                {
                    "$set": {"index_status": "pending", "next_attempt_at": datetime.now(UTC)},
                    "$inc": {"version": 1},
                },
            )
            return await super().id_range(selection)

    selection = Selection(chunker.version, embedding_model_key(embedder))
    stats = await MigrationRunner(indexing.reconciler, EditedMeanwhile(db), selection).run()
    await embedder.aclose()
    assert (stats.selected, stats.done, stats.indexed) == (3, 5, 5)
    assert (stats.left_selection, stats.joined_selection) == (0, 2)
    out = MigrationSummary(stats, 1.0).as_dict()
    assert out["joined_selection"] == 2 and out["exit_code"] == 0
    await check_all_indexed(db, chunker, first + later)
