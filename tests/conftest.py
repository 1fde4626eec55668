"""Shared fixtures: ONE real embedded database server per test session (SecantusDB, the same
server `make run` uses), a fresh database per test, and the app served in-process through
its real lifespan. Nothing here mocks our database code."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pymongo import MongoClient

from api.app import create_app
from api.config import Settings
from api.db.embedded import EmbeddedMongo
from benchmarks.service_harness import bench_settings
from tests.stubs.fixtures import openai_stub, openai_stub_client, openai_stub_server  # noqa: F401

ADMIN_TOKEN = "test-admin-token"


def fresh_user_name() -> str:
    return f"user-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def mongo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The session's database server (or AUTONOTE_TEST_MONGODB_URL, e.g. a real mongod)."""
    external = os.environ.get("AUTONOTE_TEST_MONGODB_URL")
    if external:
        yield external
        return
    # Without --sync-on-commit: this server is never hard-killed, and flushing every
    # commit made each small write ~8x slower and dropping a test's database ~100x slower
    # (one flush per removed key). The durability tests run servers of their own, with it.
    # AUTONOTE_TEST_SYNC_ON_COMMIT=1 runs the suite with it.
    sync = os.environ.get("AUTONOTE_TEST_SYNC_ON_COMMIT") == "1"
    server = EmbeddedMongo(tmp_path_factory.mktemp("mongo"), sync_on_commit=sync)
    yield server.start()
    server.stop()


@pytest.fixture
def db_name() -> str:
    return f"t_{uuid.uuid4().hex[:16]}"


@pytest.fixture
def make_settings(mongo_url: str, db_name: str, tmp_path: Path) -> Iterator[Any]:
    """Settings for a test: its own database, no default user, quiet logs. Explicit keyword
    values override anything in the environment (e.g. a stray OPENAI_API_KEY)."""

    def make(**overrides: Any) -> Settings:
        return settings_for_tests(mongo_url, db_name, tmp_path / "data", **overrides)

    yield make
    client: MongoClient = MongoClient(mongo_url, serverSelectionTimeoutMS=2000)
    try:
        client.drop_database(db_name)
    finally:
        client.close()


def settings_for_tests(mongo_url: str, db: str, data_dir: Path, **overrides: Any) -> Settings:
    """The benchmarks' isolated settings (database `db`, no default user, no rate limit,
    the local model, no chat model, quiet logs) with the tests' admin token and a short
    shutdown grace; `overrides` win."""
    values: dict[str, Any] = {
        "autonote_admin_token": ADMIN_TOKEN,
        # Shutdown lets in-flight notes finish; tests stop apps mid-indexing all the time.
        "autonote_index_stop_grace_s": 2.0,
        "chat_base_url": None,  # chat on the embeddings' server unless a test says otherwise
        "chat_api_key": None,
        **overrides,
    }
    return bench_settings(mongo_url, db, data_dir, **values)


@contextmanager
def served_app(
    mongo_url: str, tmp_path_factory: pytest.TempPathFactory, name: str, **overrides: Any
) -> Iterator[ServedApp]:
    """`ServedApp` on a database of its own, dropped afterwards (for module fixtures)."""
    db = f"t_{name}_{uuid.uuid4().hex[:10]}"
    data_dir = Path(tmp_path_factory.mktemp(name))
    config = settings_for_tests(mongo_url, db, data_dir, log_level="ERROR", **overrides)
    with ServedApp(config) as app:
        yield app
    MongoClient(mongo_url).drop_database(db)


@dataclass
class Api:
    """An in-process app and an HTTP client speaking to it."""

    app: Any
    client: httpx.AsyncClient

    @property
    def container(self) -> Any:
        return self.app.state.container

    async def new_user(self, name: str | None = None) -> dict[str, str]:
        """Create a user through the admin API (a fresh name unless given: names are
        unique); return its auth headers."""
        resp = await self.client.post(
            "/v1/admin/users",
            json={"name": name or fresh_user_name()},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        assert resp.status_code == 201, resp.text
        return {"Authorization": f"Bearer {resp.json()['api_key']}"}


@asynccontextmanager
async def running_app(settings: Settings) -> AsyncIterator[Api]:
    """Run the app's real lifespan (database, models, workers) around an httpx client."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield Api(app=app, client=client)


@pytest.fixture
async def api(make_settings: Any) -> AsyncIterator[Api]:
    """The app with default test settings."""
    async with running_app(make_settings()) as running:
        yield running


class ServedApp:
    """The app served for real by uvicorn on 127.0.0.1 in a background thread (for tests
    that need actual HTTP: CLI commands, SSE clients, schemathesis, load)."""

    def __init__(self, settings: Settings) -> None:
        import socket
        import threading

        import uvicorn

        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.app = create_app(settings)
        config = uvicorn.Config(
            self.app, log_config=None, access_log=False, lifespan="on", timeout_graceful_shutdown=5
        )
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ServedApp:
        import time

        self._thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self._thread.join(30)
        self._sock.close()

    def new_user(self, name: str | None = None) -> str:
        """Create a user through the admin API (a fresh name unless given: names are
        unique); return its API key."""
        resp = httpx.post(
            f"{self.url}/v1/admin/users",
            json={"name": name or fresh_user_name()},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=30,
        )
        assert resp.status_code == 201, resp.text
        return resp.json()["api_key"]
