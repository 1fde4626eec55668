"""A running app with a few indexed notes (sections, a table and a code block long enough to
be split into parts) for the integrity tests to corrupt, check and repair."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from bson import ObjectId
from pymongo import AsyncMongoClient

from api.cli.check import expectations
from api.config import Settings, load_settings
from api.integrity import CheckReport, Expectations, IntegrityChecker
from tests.conftest import ADMIN_TOKEN, Api, running_app
from tests.helpers import sectioned_note, wait_indexed


def big_table(rows: int) -> str:
    lines = ["| id | name | notes |", "|---|---|---|"]
    lines += [f"| {i} | item {i} | kernel cache shard vector {i} |" for i in range(rows)]
    return "\n".join(lines)


def long_code(lines: int) -> str:
    body = "\n".join(f"value_{i} = compute(value_{i - 1}, {i})  # step {i}" for i in range(lines))
    return f"```python\n{body}\n```"


NOTES = [
    ("Plain", sectioned_note(4, seed=1, words=40)),
    ("Table", f"## Inventory\n\n{big_table(60)}\n\n## After\n\nSome text after the table."),
    ("Code", f"## Script\n\n{long_code(80)}\n\nThe end."),
    ("Mixed", sectioned_note(3, seed=2, words=30) + "\n\n## Unicode\n\nÉté à Kyōto 🚄 — 東京."),
]


@dataclass
class World:
    """The app, its database, a user and its indexed notes."""

    api: Api
    settings: Settings
    headers: dict[str, str]
    note_ids: list[ObjectId]
    expect: Expectations

    @property
    def db(self) -> Any:
        return self.api.container.db

    def checker(self, **kwargs: Any) -> IntegrityChecker:
        return IntegrityChecker(self.db, self.expect, settle_s=kwargs.pop("settle_s", 0), **kwargs)

    async def check(self) -> CheckReport:
        return await self.checker().run()

    async def converge(self, timeout_s: float = 60) -> None:
        """Wait until no note is queued or being indexed (and evictions are done)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            # The worker clears `evict_pending` once a commit's old versions are deleted.
            busy = await self.db.notes.count_documents(
                {
                    "$or": [
                        {"index_status": {"$in": ["pending", "indexing"]}},
                        {"evict_pending": True},
                    ]
                }
            )
            if not busy:
                return
            await asyncio.sleep(0.05)
        raise AssertionError("indexing did not converge")

    async def chunks(self, note_id: ObjectId) -> list[dict[str, Any]]:
        return (
            await self.db.note_chunks.find({"note_id": note_id})
            .sort([("note_version", 1), ("chunk_index", 1)])
            .to_list()
        )


@dataclass(frozen=True)
class Snapshot:
    """Every document of a database in which NOTES were created and indexed."""

    collections: dict[str, list[dict[str, Any]]]
    headers: dict[str, str]
    note_ids: list[ObjectId]


@pytest.fixture(scope="session")
async def indexed_snapshot(mongo_url: str, tmp_path_factory: pytest.TempPathFactory) -> Snapshot:
    """Index NOTES once per session (the local model is the slow part) and keep the
    documents; each test restores them into its own fresh database."""
    db_name = f"t_snap_{uuid.uuid4().hex[:12]}"
    settings = load_settings(
        mongodb_url=mongo_url,
        mongodb_db=db_name,
        autonote_data_dir=tmp_path_factory.mktemp("d"),
        autonote_create_default_user=False,
        autonote_admin_token=ADMIN_TOKEN,
        autonote_rate_limit_per_minute=0,
        openai_api_key=None,
        openai_base_url=None,
        embedding_provider="local",
        chat_model=None,
        log_level="WARNING",
        log_json=True,
        autonote_index_poll_s=0.1,
    )
    async with running_app(settings) as api:
        h = await api.new_user("integrity")
        ids = []
        for title, content in NOTES:
            r = await api.client.post(
                "/v1/notes", json={"title": title, "content_md": content}, headers=h
            )
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
        for note_id in ids:
            await wait_indexed(api, h, note_id)
        db = api.container.db
        await World(api, settings, h, [], expectations(settings)).converge()
        dump = {
            name: await db[name].find({}).to_list()
            for name in ("notes", "note_chunks", "users", "api_keys", "embedding_cache")
        }
        await api.container.client.drop_database(db_name)
    return Snapshot(dump, h, [ObjectId(i) for i in ids])


@pytest.fixture
async def world(
    make_settings: Any, indexed_snapshot: Snapshot, mongo_url: str
) -> AsyncIterator[World]:
    """The snapshot restored into this test's database, served by a running app."""
    settings = make_settings(autonote_index_poll_s=0.1)
    client: AsyncMongoClient = AsyncMongoClient(mongo_url)
    try:
        db = client[settings.mongodb_db]
        for name, docs in indexed_snapshot.collections.items():
            if docs:
                await db[name].insert_many([dict(d) for d in docs])
    finally:
        await client.close()
    async with running_app(settings) as api:
        world = World(
            api,
            settings,
            indexed_snapshot.headers,
            list(indexed_snapshot.note_ids),
            expectations(settings),
        )
        # The app's startup maintenance sweeps chunks of missing notes: a test that plants
        # such chunks right after start-up could see them deleted before its check.
        await asyncio.wait_for(api.container.indexing.workers.maintained.wait(), 60)
        await world.converge()
        yield world
