"""Notes edited through the API while the migration runs (the API's own workers are off,
so only the migration indexes): each ends indexed at its latest version, with the latest
content's chunks — whether the edit came before or after the migration reached it."""

from __future__ import annotations

import asyncio
from typing import Any

from bson import ObjectId

from tests.conftest import ADMIN_TOKEN, running_app
from tests.migration.support import check_all_indexed, chunker_for, insert_legacy, run_in_process

EDIT = "## Rewritten\n\nThe edited body of note {n}.\n\n## Added\n\nA section that is new."


async def test_edits_during_the_migration_are_indexed_at_their_latest_version(
    make_settings: Any,
) -> None:
    settings = make_settings(autonote_index_workers=0)
    async with running_app(settings) as api:
        r = await api.client.post(
            "/v1/admin/users",
            json={"name": "legacy owner"},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        user = r.json()
        h = {"Authorization": f"Bearer {user['api_key']}"}
        db = api.container.db
        ids = await insert_legacy(db, 60, [ObjectId(user["user_id"])])
        early, late = ids[0], ids[57]  # both carry a legacy `version`
        trashed = ids[1]
        before = {
            d["_id"]: d for d in await db.notes.find({"_id": {"$in": [early, late]}}).to_list()
        }

        migration = asyncio.create_task(run_in_process(settings, concurrency=2, batch_size=10))
        for _ in range(6000):
            note = await db.notes.find_one({"_id": early})
            other = await db.notes.find_one({"_id": trashed})
            if (
                note.get("index_status") == "indexed"
                and other.get("index_status") == "indexed"
                and await db.notes.count_documents({"index_status": "indexed"}) >= 5
            ):
                break
            assert not migration.done(), migration
            await asyncio.sleep(0.02)
        late_now = await db.notes.find_one({"_id": late})
        assert "index_status" not in late_now, "the migration has not reached it yet"

        for note_id, n in ((early, 0), (late, 57)):
            r = await api.client.patch(
                f"/v1/notes/{note_id}", json={"content_md": EDIT.format(n=n)}, headers=h
            )
            assert r.status_code == 200, r.text
            assert r.json()["version"] == before[note_id]["version"] + 1
        assert await db.note_chunks.count_documents({"note_id": trashed}) > 0
        assert (await api.client.delete(f"/v1/notes/{trashed}", headers=h)).status_code == 200

        code, result = await migration
        assert code == 0, result
        assert result["indexed"] == 60 and result["reindexed_after_edit"] == 1
        # Trashed after the migration indexed it: its chunks left the index all the same.
        assert await db.note_chunks.count_documents({"note_id": trashed}) == 0
        await check_all_indexed(db, chunker_for(settings), [i for i in ids if i != trashed])
        for note_id, n in ((early, 0), (late, 57)):
            got = (await api.client.get(f"/v1/notes/{note_id}", headers=h)).json()
            assert got["version"] == before[note_id]["version"] + 1
            assert got["index_status"] == "indexed" and got["indexed_version"] == got["version"]
            chunks = (await api.client.get(f"/v1/notes/{note_id}/chunks", headers=h)).json()
            assert [c["heading_path"][-1] for c in chunks["items"]] == ["Rewritten", "Added"]
            assert f"note {n}." in chunks["items"][0]["content_md"]
