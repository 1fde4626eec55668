"""Plumbing shared by the notes-API and indexing benchmarks.

- `embedded_server()` runs the embedded database (SecantusDB, the server `make run` uses) in
  its own temporary data directory and stops it afterwards.
- `bench_settings()` builds app settings for a benchmark: its own database, the local
  embedding model, no default user, no rate limit (the per-key limit would otherwise turn a
  load test into a 429 test), overrides last.
- `in_process_app()` runs the app's real lifespan (database client, models, workers) and an
  httpx client over ASGI — the same thing `tests/conftest.py::running_app` does, without
  importing pytest fixtures into a script.
- `LatencySummary` / `summarize()` turn per-request seconds into P50/P95/P99 milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from pymongo import MongoClient

from api.config import Settings, load_settings
from api.db.embedded import EmbeddedMongo

ADMIN_TOKEN = "bench-admin-token"


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Latency percentiles of one series, in milliseconds."""

    n: int
    p50: float
    p95: float
    p99: float
    mean: float

    def row(self) -> list[str]:
        """`[n, P50, P95, P99]` formatted for a report table."""
        return [str(self.n), f"{self.p50:.2f}", f"{self.p95:.2f}", f"{self.p99:.2f}"]


def summarize(samples_s: list[float]) -> LatencySummary:
    """Percentiles (linear interpolation) of latencies given in seconds."""
    if not samples_s:
        raise ValueError("no samples to summarize")
    ms = np.asarray(samples_s, dtype=np.float64) * 1000.0
    p50, p95, p99 = np.percentile(ms, [50, 95, 99])
    return LatencySummary(len(ms), float(p50), float(p95), float(p99), float(ms.mean()))


@contextlib.contextmanager
def embedded_mongo(data_dir: Path | None = None) -> Iterator[EmbeddedMongo]:
    """Start the embedded server in `data_dir` (default: a fresh temp dir); yield it
    (`.url`, and `.process` for its resources).

    Runs in the calling thread so the server's parent-death signal follows this process.
    A temp dir made here is removed afterwards.
    """
    own_dir = data_dir is None
    path = Path(tempfile.mkdtemp(prefix="autonote-bench-")) if data_dir is None else data_dir
    server = EmbeddedMongo(path)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        if own_dir:
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def embedded_server(data_dir: Path | None = None) -> Iterator[str]:
    """`embedded_mongo`, yielding its URL."""
    with embedded_mongo(data_dir) as server:
        yield server.url


def bench_settings(mongo_url: str, db_name: str, data_dir: Path, **overrides: Any) -> Settings:
    """Settings for a benchmark run; explicit values beat anything in the environment."""
    values: dict[str, Any] = {
        "mongodb_url": mongo_url,
        "mongodb_db": db_name,
        "autonote_data_dir": data_dir,
        "autonote_create_default_user": False,
        "autonote_admin_token": ADMIN_TOKEN,
        "autonote_rate_limit_per_minute": 0,
        "openai_api_key": None,
        "openai_base_url": None,
        "embedding_provider": "local",
        "chat_model": None,
        "log_level": "WARNING",
        "log_json": True,
    }
    values.update(overrides)
    return load_settings(**values)


def drop_database(mongo_url: str, db_name: str) -> None:
    """Remove a benchmark database (each scenario starts from an empty one)."""
    client: MongoClient = MongoClient(mongo_url, serverSelectionTimeoutMS=5000)
    try:
        client.drop_database(db_name)
    finally:
        client.close()


@dataclass
class InProcessApp:
    """The app running its real lifespan, and an httpx client speaking ASGI to it."""

    app: Any
    client: httpx.AsyncClient

    @property
    def container(self) -> Any:
        return self.app.state.container

    async def new_user(self, name: str | None = None) -> dict[str, str]:
        """Create a user with the app's own admin token (a fresh name unless given: names
        are unique); return its auth headers."""
        token = self.container.settings.autonote_admin_token
        return await new_user(self.client, name, token.get_secret_value() if token else "")


@contextlib.asynccontextmanager
async def in_process_app(settings: Settings) -> AsyncIterator[InProcessApp]:
    """Run `create_app(settings)` with its lifespan around an ASGI httpx client."""
    from api.app import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", timeout=120
        ) as client:
            yield InProcessApp(app=app, client=client)


async def new_user(
    client: httpx.AsyncClient, name: str | None = None, admin_token: str = ADMIN_TOKEN
) -> dict[str, str]:
    """Create a user through the admin API (a fresh name unless given: names are unique);
    return its auth headers."""
    resp = await client.post(
        "/v1/admin/users",
        json={"name": name or f"bench-{uuid.uuid4().hex[:12]}"},
        headers={"Authorization": f"Bearer {admin_token}"},
    )
    if resp.status_code != 201:
        raise RuntimeError(f"creating a user failed: {resp.status_code} {resp.text[:300]}")
    return {"Authorization": f"Bearer {resp.json()['api_key']}"}


async def wait_until(
    check: Callable[[], Awaitable[bool]], *, timeout_s: float, interval_s: float, what: str
) -> float:
    """Poll `check` until it is true; return the seconds waited (TimeoutError after)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    while not await check():
        if loop.time() - start > timeout_s:
            raise TimeoutError(f"{what}: not reached within {timeout_s}s")
        await asyncio.sleep(interval_s)
    return loop.time() - start


async def alternating_rounds(
    modes: Sequence[str],
    rounds: int,
    run: Callable[[str, str], Awaitable[dict[str, Any]]],
    describe: Callable[[dict[str, Any]], str],
) -> list[dict[str, Any]]:
    """`rounds` rounds of every mode, the modes alternating (A B A B ...) so machine drift
    hits them alike, all on one embedded server: `run(url, mode)` is one round (in a fresh
    database of its own); each result is printed as `describe(result)`."""
    results = []
    with embedded_server() as url:
        for i in range(rounds * len(modes)):
            mode = modes[i % len(modes)]
            result = await run(url, mode)
            print(f"{mode}: {describe(result)}", flush=True)
            results.append(result)
    return results


def ratio(a: float, b: float) -> str:
    """`a / b` as a short "×" string (— when b is zero)."""
    return f"{a / b:.2f}×" if b > 0 else "—"
