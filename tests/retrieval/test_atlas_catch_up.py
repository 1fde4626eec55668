"""On Atlas, `mongot` indexes the chunks a commit writes asynchronously. While it catches
up, a re-indexed note's previous chunks stay searchable (`ATLAS_INDEX_LAG_S`), so the note
is found before, during and after an edit, and never twice: each note shows its newest
version. `mongot` is the boundary faked here: a search index over a snapshot of
`note_chunks` taken when the test says it caught up; everything after the search stage
(the version guard's `$lookup` into `notes`) runs on the real embedded server."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from bson import ObjectId

import api.container
from api.notes.repository import NotesSearchQueries
from api.retrieval.backends import AtlasBackend
from api.retrieval.service import RetrievalService
from tests.conftest import running_app
from tests.helpers import wait_indexed


class LaggingSearchIndex:
    """Answers `$search` from the chunks as they were at the last `catch_up()`, as
    `mongot` answers from what it has indexed so far."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.snapshot: list[dict[str, Any]] = []

    async def catch_up(self) -> None:
        self.snapshot = await self.db.note_chunks.find().to_list()

    async def aggregate(self, pipeline: list[dict[str, Any]]) -> Any:
        stage = pipeline[0]["$search"]
        words = set(re.findall(r"\w+", stage["compound"]["must"][0]["text"]["query"].lower()))
        author = next(f["equals"]["value"] for f in stage["compound"]["filter"] if "equals" in f)
        hits = [
            {**doc, "score": float(len(words & set(re.findall(r"\w+", doc["content_md"].lower()))))}
            for doc in self.snapshot
            if doc["author_id"] == author
            and words & set(re.findall(r"\w+", doc["content_md"].lower()))
        ]
        scratch = self.db[f"mongot_{uuid.uuid4().hex[:8]}"]
        if hits:
            await scratch.insert_many(hits)
        rest = [_without_meta(s) for s in pipeline[1:]]
        try:
            return _Listed(await (await scratch.aggregate(rest)).to_list())
        finally:
            await scratch.drop()


class _Listed:
    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs = docs

    async def to_list(self, length: int | None = None) -> list[dict[str, Any]]:
        return self.docs[:length]


def _without_meta(stage: dict[str, Any]) -> dict[str, Any]:
    """The projection's `{"$meta": "searchScore"}` is `mongot`'s: read the fake's score."""
    if "$project" in stage and isinstance(stage["$project"].get("score"), dict):
        return {"$project": {**stage["$project"], "score": "$score"}}
    return stage


async def _found(service: RetrievalService, author: ObjectId, word: str) -> list[list[str]]:
    """Per result note, the texts of its matching sections."""
    outcome = await service.search(author, word, mode="keyword", limit=10)
    return [[m.content_md for m in r.matching_chunks] for r in outcome.results]


@pytest.mark.parametrize("lag_s", [60.0, 0.0], ids=["retained", "evicted-at-once"])
async def test_an_edited_note_stays_searchable_while_the_index_catches_up(
    make_settings: Any, monkeypatch: pytest.MonkeyPatch, lag_s: float
) -> None:
    monkeypatch.setattr(api.container, "retention_for", lambda _settings, _backend: lag_s)
    async with running_app(make_settings()) as app:
        h = await app.new_user()
        author = ObjectId((await app.client.get("/v1/me", headers=h)).json()["user_id"])
        db = app.container.db
        index = LaggingSearchIndex(db)
        service = RetrievalService(
            AtlasBackend(db, vector_index="v", text_index="t"),
            app.container.embedder,
            NotesSearchQueries(db),
        )
        service.backend.chunks = index  # the search stage runs against the lagging index
        body = {"title": "Field log", "content_md": "## Sighting\n\nA quokka near the bay."}
        note_id = (await app.client.post("/v1/notes", json=body, headers=h)).json()["id"]
        await wait_indexed(app, h, note_id)
        await index.catch_up()
        assert await _found(service, author, "quokka") == [["A quokka near the bay."]]

        edit = {"content_md": "## Sighting\n\nA quokka on the pier."}
        await app.client.patch(f"/v1/notes/{note_id}", json=edit, headers=h)
        await wait_indexed(app, h, note_id)
        during = await _found(service, author, "quokka")  # mongot has not seen version 2
        if lag_s == 0.0:
            assert during == [], "evicted at once, the note vanishes until mongot catches up"
            return
        assert during == [["A quokka near the bay."]]

        await index.catch_up()  # both versions are indexed now: the newest is shown, once
        assert await _found(service, author, "quokka") == [["A quokka on the pier."]]

        # The retention runs out: the maintenance sweep evicts version 1.
        await db.notes.update_one(
            {"_id": ObjectId(note_id)},
            {"$set": {"evict_after": datetime.now(UTC) - timedelta(seconds=1)}},
        )
        report = await app.container.indexing.workers.maintenance_once(orphans=False)
        assert report.evicted >= 1
        versions = {
            d["note_version"] async for d in db.note_chunks.find({"note_id": ObjectId(note_id)})
        }
        assert versions == {2}
        note = await db.notes.find_one({"_id": ObjectId(note_id)})
        assert "previous_indexed_version" not in note and "evict_pending" not in note
        await index.catch_up()
        assert await _found(service, author, "quokka") == [["A quokka on the pier."]]
