"""The database client fails fast when the server is gone: within MONGODB_TIMEOUT_MS (server
selection), not after the much longer per-operation budget.

Pinned without a clock: the client has no operation budget (`timeoutMS`) that would replace
the selection timeout, and every server selection behind the error gave up after the
configured timeout, as PyMongo's error reports it ("Timeout: 0.5s")."""

from __future__ import annotations

import re

import pytest
from pymongo import AsyncMongoClient
from pymongo.errors import PyMongoError, ServerSelectionTimeoutError

from api.db.client import create_client, is_unavailable
from api.db.embedded import EmbeddedMongo
from tests.faults.support import free_port


def selection_timeouts(exc: BaseException | None) -> list[float]:
    """The timeout of every server selection that gave up in `exc`'s chain (a retried
    read raises its first error, with the retry's selection as its context)."""
    found = []
    while exc is not None:
        if isinstance(exc, ServerSelectionTimeoutError):
            found.append(float(re.search(r"Timeout: ([\d.]+)s,", str(exc))[1]))  # type: ignore[index]
        exc = exc.__context__
    return found


def assert_selection_bounded(client: AsyncMongoClient, seconds: float) -> None:
    assert client.options.server_selection_timeout == seconds
    assert client.options.timeout is None, "an operation budget overrides the selection timeout"


async def test_unreachable_server_fails_within_the_selection_timeout() -> None:
    client = create_client(f"mongodb://127.0.0.1:{free_port()}/?directConnection=true",
                           timeout_ms=500)  # fmt: skip
    try:
        assert_selection_bounded(client, 0.5)
        with pytest.raises(PyMongoError) as info:
            await client.autonote.notes.find_one({})
    finally:
        await client.close()
    assert is_unavailable(info.value)
    assert selection_timeouts(info.value) == [0.5], info.value


async def test_killed_server_fails_fast_then_recovers_on_the_same_client(tmp_path) -> None:
    port = free_port()
    server = EmbeddedMongo(tmp_path, port=port)
    client = create_client(server.start(), timeout_ms=1000)
    try:
        assert_selection_bounded(client, 1.0)
        await client.autonote.notes.insert_one({"n": 1})
        server.process.kill()  # type: ignore[union-attr]
        server.process.wait()  # type: ignore[union-attr]
        for op in ("read", "write"):
            with pytest.raises(PyMongoError) as info:
                if op == "read":
                    await client.autonote.notes.find_one({})
                else:
                    await client.autonote.notes.insert_one({"n": 2})
            assert is_unavailable(info.value), info.value
            # A retryable operation selects a server again: each selection within 1 s.
            timeouts = selection_timeouts(info.value)
            assert timeouts and set(timeouts) == {1.0}, (op, info.value)
        server = EmbeddedMongo(tmp_path, port=port)
        server.start()
        assert await client.autonote.notes.count_documents({"n": 1}) == 1
    finally:
        await client.close()
        server.stop()
