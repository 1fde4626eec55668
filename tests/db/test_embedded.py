"""The embedded SecantusDB server: data survives restarts and SIGKILL (it runs with
--sync-on-commit), a second process attaches instead of starting another server, and a
leftover server of a crashed owner is cleaned up."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from api.db.client import ensure_indexes
from api.db.embedded import EmbeddedMongo, embedded_server, ping


def test_restart_keeps_data(tmp_path: Path) -> None:
    server = EmbeddedMongo(tmp_path)
    url = server.start()
    with MongoClient(url) as c:
        c.autonote.notes.insert_one({"title": "persisted"})
    server.stop()
    # Nothing runs there now; the port is kept for the next start (see below).
    assert json.loads((tmp_path / "embedded.json").read_text()) == {
        "pid": None,
        "port": server.port,
    }
    again = EmbeddedMongo(tmp_path)
    with MongoClient(again.start()) as c:
        assert c.autonote.notes.find_one({})["title"] == "persisted"
    assert again.port == server.port and again.owner
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


async def test_ensure_indexes_is_idempotent_and_has_the_chunk_indexes(
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
            (("note_id", 1), ("generation", 1), ("note_version", 1), ("chunk_index", 1))
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

    from api.chunk_store.cache import EmbeddingCacheRepository
    from api.db.client import create_client

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


async def test_an_attached_process_restarts_the_server_its_owner_stopped(tmp_path: Path) -> None:
    """`autonote worker` started the server and `serve` attached; stopping the worker must
    not take the API's database down for good: the attached process starts it again on the
    same port, and its client carries on."""
    from api.db.client import create_client

    owner = EmbeddedMongo(tmp_path)
    owner.start()
    async with embedded_server(tmp_path) as guest:
        assert not guest.owner and guest.url == owner.url
        client = create_client(guest.url, timeout_ms=3000)
        try:
            await client.autonote.notes.insert_one({"before": 1})
            owner.stop()  # its process exits: the server with it
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while True:  # the keeper checks every second
                try:
                    await client.autonote.notes.insert_one({"after": 1})
                    break
                except PyMongoError:
                    assert loop.time() < deadline, "the attached process never restarted it"
                    await asyncio.sleep(0.2)
            assert guest.owner and guest.port == owner.port
            assert await client.autonote.notes.count_documents({}) == 2  # nothing lost
        finally:
            await client.close()
    assert not ping(owner.port)  # the new owner stopped it at the end of its block


def test_processes_starting_together_share_one_server(tmp_path: Path) -> None:
    servers = [EmbeddedMongo(tmp_path) for _ in range(3)]
    with ThreadPoolExecutor(3) as pool:
        urls = list(pool.map(lambda s: s.start(), servers))
    try:
        assert len(set(urls)) == 1 and sum(s.owner for s in servers) == 1
    finally:
        for s in sorted(servers, key=lambda s: s.owner):  # guests first
            s.stop()


async def test_commands_that_only_read_refuse_a_directory_without_a_database(
    tmp_path: Path,
) -> None:
    with pytest.raises(FileNotFoundError, match="no database"):
        async with embedded_server(tmp_path / "typo", must_exist=True):
            pass
    assert not (tmp_path / "typo").exists()


def test_a_replaced_owner_never_kills_the_live_server(tmp_path: Path) -> None:
    """A started the server, B attached. The server crashed and B's keeper started it
    again; A, still holding its dead process, must not treat the server as gone and kill
    the new one when it is slow to answer (SIGSTOP stands in for a long fsync)."""
    a, b = EmbeddedMongo(tmp_path), EmbeddedMongo(tmp_path)
    a.start()
    b.start()
    assert a.process is not None and not b.owner
    a.process.kill()
    a.process.wait()
    assert b.restart_if_gone() and b.owner and b.process is not None
    live = b.process.pid
    try:
        assert a.restart_if_gone() is False and not a.owner  # B's server now
        os.kill(live, signal.SIGSTOP)
        try:
            assert a.restart_if_gone() is False
        finally:
            os.kill(live, signal.SIGCONT)
        assert b.port is not None and ping(b.port, timeout_ms=3000)
    finally:
        a.stop()
        b.stop()
