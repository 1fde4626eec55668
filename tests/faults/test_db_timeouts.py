"""The database client fails fast when the server is gone: within MONGODB_TIMEOUT_MS (server
selection), not after the much longer per-operation budget."""

from __future__ import annotations

import time

import pytest
from pymongo.errors import PyMongoError

from api.db.client import create_client, is_unavailable
from api.db.embedded import EmbeddedMongo
from tests.faults.support import free_port


async def test_unreachable_server_fails_within_the_selection_timeout() -> None:
    client = create_client(f"mongodb://127.0.0.1:{free_port()}/?directConnection=true",
                           timeout_ms=500)  # fmt: skip
    try:
        started = time.monotonic()
        with pytest.raises(PyMongoError) as info:
            await client.autonote.notes.find_one({})
        elapsed = time.monotonic() - started
    finally:
        await client.close()
    assert is_unavailable(info.value)
    assert elapsed < 3, f"waited {elapsed:.1f}s for a server that is not there (timeout 0.5s)"


async def test_killed_server_fails_fast_then_recovers_on_the_same_client(tmp_path) -> None:
    port = free_port()
    server = EmbeddedMongo(tmp_path, port=port)
    client = create_client(server.start(), timeout_ms=1000)
    try:
        await client.autonote.notes.insert_one({"n": 1})
        server.process.kill()  # type: ignore[union-attr]
        server.process.wait()  # type: ignore[union-attr]
        for op in ("read", "write"):
            started = time.monotonic()
            with pytest.raises(PyMongoError) as info:
                if op == "read":
                    await client.autonote.notes.find_one({})
                else:
                    await client.autonote.notes.insert_one({"n": 2})
            elapsed = time.monotonic() - started
            assert is_unavailable(info.value), info.value
            # A retryable write selects a server twice: at most ~2 x the timeout.
            assert elapsed < 4, f"{op} took {elapsed:.1f}s to fail with a 1s timeout"
        server = EmbeddedMongo(tmp_path, port=port)
        server.start()
        assert await client.autonote.notes.count_documents({"n": 1}) == 1
    finally:
        await client.close()
        server.stop()
