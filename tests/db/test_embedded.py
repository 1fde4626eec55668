"""The embedded SecantusDB server: data survives restarts and SIGKILL (it runs with
--sync-on-commit), a second process attaches instead of starting another server, and a
leftover server of a crashed owner is cleaned up."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from pymongo import MongoClient

from api.db.client import ensure_indexes
from api.db.embedded import EmbeddedMongo, ping


def test_restart_keeps_data(tmp_path: Path) -> None:
    server = EmbeddedMongo(tmp_path)
    url = server.start()
    with MongoClient(url) as c:
        c.autonote.notes.insert_one({"title": "persisted"})
    server.stop()
    assert not (tmp_path / "embedded.json").exists()
    again = EmbeddedMongo(tmp_path)
    with MongoClient(again.start()) as c:
        assert c.autonote.notes.find_one({})["title"] == "persisted"
    again.stop()


def test_acknowledged_writes_survive_sigkill(tmp_path: Path) -> None:
    server = EmbeddedMongo(tmp_path)
    url = server.start()
    with MongoClient(url) as c:
        for i in range(300):
            c.autonote.notes.insert_one({"i": i})  # each acknowledged before the next
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait()
    server.process = None
    again = EmbeddedMongo(tmp_path)
    with MongoClient(again.start()) as c:
        assert c.autonote.notes.count_documents({}) == 300
    again.stop()


def test_second_process_attaches_and_does_not_stop_the_owner(tmp_path: Path) -> None:
    owner = EmbeddedMongo(tmp_path)
    owner.start()
    guest = EmbeddedMongo(tmp_path)
    assert guest.start() == owner.url and not guest.owner
    guest.stop()
    assert owner.port is not None and ping(owner.port)
    owner.stop()


def test_server_dies_with_a_killed_owner_and_restart_works(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import time
        from api.db.embedded import EmbeddedMongo
        from pymongo import MongoClient
        s = EmbeddedMongo({str(tmp_path)!r}); url = s.start()
        MongoClient(url).autonote.notes.insert_one({{"ok": 1}})
        print("ready", flush=True); time.sleep(60)
    """)
    owner = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert owner.stdout is not None
    while (line := owner.stdout.readline()) and line.strip() != b"ready":
        pass  # start-up log lines
    assert line.strip() == b"ready"
    pid = json.loads((tmp_path / "embedded.json").read_text())["pid"]
    owner.kill()
    owner.wait()
    for _ in range(100):  # the parent-death signal stops the server
        try:
            if b"Z" in Path(f"/proc/{pid}/stat").read_bytes()[:60]:
                break  # dead, not yet reaped
        except FileNotFoundError:
            break  # dead and reaped
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)  # do not leak it past the failure
        raise AssertionError(f"server {pid} outlived its killed owner by 10 s")
    again = EmbeddedMongo(tmp_path)
    with MongoClient(again.start()) as c:
        assert c.autonote.notes.count_documents({"ok": 1}) == 1
    again.stop()


async def test_ensure_indexes_is_idempotent_and_has_the_roadmap_indexes(
    mongo_url: str, db_name: str
) -> None:
    from api.db.client import create_client

    client = create_client(mongo_url)
    try:
        db = client[db_name]
        await ensure_indexes(db)
        await ensure_indexes(db)
        info = await db.note_chunks.index_information()
        keys = {tuple(v["key"]) for v in info.values()}
        for expected in (
            [("note_id", 1)],
            [("note_id", 1), ("chunk_index", 1)],
            [("note_version", 1)],
            [("note_id", 1), ("note_version", 1)],
        ):
            assert tuple(expected) in keys
        unique = [v for v in info.values() if v.get("unique")]
        assert [tuple(u["key"]) for u in unique] == [
            (("note_id", 1), ("note_version", 1), ("chunk_index", 1))
        ]
    finally:
        await client.drop_database(db_name)
        await client.close()


async def test_ensure_indexes_scopes_an_old_embedding_cache_by_author(
    mongo_url: str, db_name: str
) -> None:
    """A database from before the cache was scoped by author has a unique (model, hash)
    index, which would refuse a second author's copy of the same text: it is dropped, and
    two authors' entries for one hash coexist."""
    from bson import ObjectId

    from api.db.client import create_client
    from api.indexing.cache_repository import EmbeddingCacheRepository

    client = create_client(mongo_url)
    try:
        db = client[db_name]
        await db.embedding_cache.create_index(
            [("model", 1), ("content_hash", 1)], name="model_hash_unique", unique=True
        )
        await db.embedding_cache.insert_many(
            [{"model": "m", "content_hash": h, "vector": [0.0]} for h in ("h", "g")]
        )
        await ensure_indexes(db)
        info = await db.embedding_cache.index_information()
        assert "model_hash_unique" not in info
        assert info["author_model_hash_unique"]["unique"]
        assert await db.embedding_cache.count_documents({}) == 0, "author-less entries go"
        # A database whose legacy index an earlier build of this step already dropped,
        # leaving its entries: they go too.
        await db.embedding_cache.insert_one({"model": "m", "content_hash": "h", "vector": []})
        await ensure_indexes(db)
        assert await db.embedding_cache.count_documents({}) == 0
        cache = EmbeddingCacheRepository(db)
        alice, bob = ObjectId(), ObjectId()
        await cache.put_many(alice, "m", {"h": [1.0]})
        await cache.put_many(bob, "m", {"h": [2.0]})
        assert await cache.get_many(alice, "m", ["h"]) == {"h": [1.0]}
        assert await cache.get_many(bob, "m", ["h"]) == {"h": [2.0]}
        assert await cache.get_many(ObjectId(), "m", ["h"]) == {}
        assert await cache.present_hashes([bob], "m", ["h", "x"]) == {(bob, "h")}
    finally:
        await client.drop_database(db_name)
        await client.close()
