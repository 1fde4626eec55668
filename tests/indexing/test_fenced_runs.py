"""A run that lost its lease (slow embedding: another worker took the note over) cannot
commit; the chunks it wrote anyway must not stay behind as orphans: on a trashed note
nothing would ever remove them, and beside a newer version they would wait for the next
edit. Each test parks run A in its embedding call, expires its lease, lets run B do the
note's current job, then lets A write and fail its commit."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from bson import ObjectId

from tests.conftest import Api
from tests.helpers import RecordingEmbedder, sectioned_note, wait_indexed


class GatedEmbedder(RecordingEmbedder):
    """Holds every embed call until `release` is set (`entered` tells it is waiting)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def embed(self, texts: list[str], **kwargs: Any) -> Any:
        self.entered.set()
        await self.release.wait()
        return await super().embed(texts, **kwargs)


class RunA:
    """Run A, indexing version 2 of a fresh note, parked in its embedding call."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.reconciler = api.container.indexing.reconciler
        self.written = asyncio.Event()
        self.done = asyncio.Event()

    async def start(self) -> None:
        api, rec = self.api, self.reconciler
        self.h = await api.new_user()
        r = await api.client.post(
            "/v1/notes",
            json={"title": "N", "content_md": sectioned_note(3, seed=1)},
            headers=self.h,
        )
        self.id = r.json()["id"]
        self.oid = ObjectId(self.id)
        await wait_indexed(api, self.h, self.id)
        self.gate = GatedEmbedder(rec.embedder)
        rec.embedder = self.gate
        insert_version, drop_fenced = rec.chunks.insert_version, rec._drop_fenced

        async def insert_and_tell(*args: Any, **kwargs: Any) -> Any:
            result = await insert_version(*args, **kwargs)
            self.written.set()
            return result

        async def drop_and_tell(*args: Any) -> None:
            await drop_fenced(*args)
            self.done.set()

        rec.chunks.insert_version = insert_and_tell  # type: ignore[method-assign]
        rec._drop_fenced = drop_and_tell  # type: ignore[method-assign]
        await api.client.patch(
            f"/v1/notes/{self.id}", json={"content_md": sectioned_note(3, seed=2)}, headers=self.h
        )
        await asyncio.wait_for(self.gate.entered.wait(), 30)
        past = datetime.now(UTC) - timedelta(seconds=1)  # A's lease ran out
        await api.container.db.notes.update_one(
            {"_id": self.oid}, {"$set": {"lease_expires_at": past}}
        )

    async def finish(self) -> list[dict[str, Any]]:
        """Let A write and fail its commit; the note's chunks afterwards."""
        self.gate.release.set()
        await asyncio.wait_for(self.done.wait(), 30)
        return await self.api.container.db.note_chunks.find({"note_id": self.oid}).to_list()


async def test_a_trashed_note_keeps_no_chunks_of_a_run_that_lost_its_lease(api: Api) -> None:
    a = RunA(api)
    await a.start()
    assert (await api.client.delete(f"/v1/notes/{a.id}", headers=a.h)).status_code == 200
    await a.reconciler.run_once(a.oid)  # B: the removal
    assert await a.finish() == []
    note = await api.container.db.notes.find_one({"_id": a.oid})
    assert note["status"] == "trashed" and note["indexed_version"] is None


async def test_no_older_version_stays_beside_the_indexed_one(api: Api) -> None:
    a = RunA(api)
    await a.start()
    await api.client.patch(
        f"/v1/notes/{a.id}", json={"content_md": sectioned_note(3, seed=3)}, headers=a.h
    )
    a.reconciler.embedder = a.gate.inner  # B embeds normally; A stays parked
    await a.reconciler.run_once(a.oid)  # B indexes version 3 and evicts older ones
    left = await a.finish()
    assert {d["note_version"] for d in left} == {3} and len(left) == 3
    note = await api.container.db.notes.find_one({"_id": a.oid})
    assert note["indexed_version"] == 3 and note["chunk_count"] == 3
