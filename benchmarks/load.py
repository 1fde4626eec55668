"""Load benchmark: concurrent simulated users against the running API.

Starts `autonote serve` (the real server: uvicorn + app factory, in-process index workers,
local ONNX embeddings, extractive chat, INFO logs to a file) in a subprocess on 127.0.0.1
against an embedded database in a temporary directory — or drives a server already running
(`--url`, with `--admin-token` to create the users, `--mongodb-url`/`--db` to sample the
queue exactly; else the `/metrics` gauge, refreshed every 30 s, is used).

Each user has their own API key and notes (seeded before the first level) and runs a closed
loop of the realistic mix in `load_mix.DEFAULT_MIX`. Concurrency steps through `--levels`
(default 1 2 4 8 16 users, `--duration` seconds each, at most `--max-requests` requests per
level); before each level a short GET /healthz baseline runs on the same connections. After
each level the benchmark waits for the indexing queue to drain, so levels do not inherit
each other's backlog. Reported: throughput, error rate by route and status, P50/P95/P99 per
route and overall, indexing lag of sampled writes, queue depth over time, and the knee —
the highest throughput whose overall P95 stays within `--p95-ms` with < 1 % errors.

Reproduce: `.venv/bin/python -m benchmarks.load` (`--quick` for a smoke-sized run,
`--no-write` to only print).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx

from benchmarks.common import update_claims, update_section
from benchmarks.load_mix import (
    DEFAULT_MIX,
    LagProbes,
    QueueSampler,
    Recorder,
    SimUser,
    run_user,
)
from benchmarks.load_report import LevelResult, claims, report
from benchmarks.notes_api_load import ServedApp, make_corpus
from benchmarks.service_harness import ADMIN_TOKEN, embedded_server, new_user

DB_NAME = "bench_load"


@dataclass(frozen=True)
class LoadConfig:
    """How hard and how long to push."""

    levels: tuple[int, ...] = (1, 2, 4, 8, 16)
    duration_s: float = 30.0
    max_requests: int = 50_000  # per level
    seed_notes: int = 4  # per user, created (and indexed) before the first level
    baseline_s: float = 3.0
    lag_share: float = 0.3
    p95_ms: float = 1000.0
    drain_timeout_s: float = 600.0  # per level, and for the seed notes
    seed: int = 11
    mix: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_MIX))

    @classmethod
    def quick(cls) -> LoadConfig:
        return cls(
            levels=(1, 2), duration_s=5.0, seed_notes=2, baseline_s=1.0, drain_timeout_s=120.0
        )


@dataclass
class Target:
    """The server under load and how to read its queue depth."""

    url: str
    admin_token: str
    depth: Callable[[], Awaitable[int]]


def mongo_depth(mongo_url: str, db: str) -> Callable[[], Awaitable[int]]:
    """Notes pending or indexing, counted in the database (what the queue itself counts)."""
    from pymongo import AsyncMongoClient

    client: AsyncMongoClient = AsyncMongoClient(mongo_url, serverSelectionTimeoutMS=5000)

    async def depth() -> int:
        return await client[db].notes.count_documents(
            {"index_status": {"$in": ["pending", "indexing"]}}
        )

    return depth


def metrics_depth(url: str) -> Callable[[], Awaitable[int]]:
    """The `index_queue_depth{state="pending"}` gauge from /metrics (updated every 30 s)."""
    from prometheus_client.parser import text_string_to_metric_families

    async def depth() -> int:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            text = (await client.get("/metrics")).text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name.startswith("index_queue_depth") and (
                    sample.labels.get("state") == "pending"
                ):
                    return int(sample.value)
        return 0

    return depth


@asynccontextmanager
async def local_target(work: Path) -> AsyncIterator[Target]:
    """An embedded database and `autonote serve` against it, both in `work`."""
    with embedded_server(work / "mongo") as mongo_url:
        env = {
            "MONGODB_URL": mongo_url,
            "MONGODB_DB": DB_NAME,
            "AUTONOTE_DATA_DIR": str(work / "data"),
            "AUTONOTE_ADMIN_TOKEN": ADMIN_TOKEN,
            # Off: the per-key limit (1200/min by default) would turn a closed-loop user
            # into a 429 test; tests/security covers the limiter.
            "AUTONOTE_RATE_LIMIT_PER_MINUTE": "0",
            "AUTONOTE_CREATE_DEFAULT_USER": "false",
            "EMBEDDING_PROVIDER": "local",
            "LOG_LEVEL": "INFO",
            "LOG_JSON": "true",
        }
        with ServedApp(env, work / "server.log") as app:
            yield Target(app.url, ADMIN_TOKEN, mongo_depth(mongo_url, DB_NAME))


async def make_users(target: Target, config: LoadConfig) -> list[SimUser]:
    """One user per concurrent slot, each with its own key and corpus share."""
    count = max(config.levels)
    per_user = config.seed_notes + 60
    corpus = make_corpus(min(count * per_user, 400), seed=config.seed)
    users = []
    async with httpx.AsyncClient(base_url=target.url, timeout=60) as client:
        for i in range(count):
            headers = await new_user(client, f"load-{i}", target.admin_token)
            start = (i * per_user) % len(corpus)
            share = (corpus[start:] + corpus[:start])[:per_user]
            users.append(SimUser(f"load-{i}", headers, share, random.Random(config.seed + i)))
    return users


async def wait_drained(depth: Callable[[], Awaitable[int]], timeout_s: float) -> float | None:
    """Seconds until the queue is empty (None if it is not within `timeout_s`)."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout_s:
        if await depth() == 0:
            return time.perf_counter() - start
        await asyncio.sleep(0.5)
    return None


def _client(target: Target, headers: dict[str, str]) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    return httpx.AsyncClient(base_url=target.url, headers=headers, limits=limits, timeout=120)


async def seed(target: Target, users: list[SimUser], config: LoadConfig) -> None:
    """Every user's starting notes, created concurrently, then indexed."""
    rec = Recorder()
    async with httpx.AsyncClient(base_url=target.url, timeout=120) as probe_client:
        probes = LagProbes(probe_client, share=0.0, rng=random.Random(0))

        async def fill(user: SimUser) -> None:
            async with _client(target, user.headers) as client:
                for _ in range(config.seed_notes):
                    await user.create(client, rec, probes)

        await asyncio.gather(*(fill(u) for u in users))
    bad = [s for s in rec.samples if s.status != s.expected]
    if bad:
        raise RuntimeError(f"seeding failed: {bad[:3]}")
    if await wait_drained(target.depth, config.drain_timeout_s) is None:
        raise RuntimeError("seed notes were not indexed in time")


async def run_level(
    target: Target, users: list[SimUser], config: LoadConfig, concurrency: int
) -> LevelResult:
    """`concurrency` users in closed loops for `duration_s`, then the drain."""
    active = users[:concurrency]
    clients = [_client(target, u.headers) for u in active]
    rng = random.Random(config.seed * 1000 + concurrency)
    try:
        base = Recorder()
        base_end = time.perf_counter() + config.baseline_s

        async def ping(client: httpx.AsyncClient) -> None:
            while time.perf_counter() < base_end:
                await base.call(client, "GET /healthz", "GET", "/healthz")

        await asyncio.gather(*(ping(c) for c in clients))
        stop = asyncio.Event()
        sampler = QueueSampler(target.depth)
        sampling = asyncio.create_task(sampler.run(stop))
        async with httpx.AsyncClient(base_url=target.url, timeout=60) as probe_client:
            probes = LagProbes(probe_client, config.lag_share, rng)
            rec = Recorder()
            budget = [config.max_requests]
            start = time.perf_counter()
            deadline = start + config.duration_s
            await asyncio.gather(
                *(
                    run_user(u, c, rec, probes, config.mix, deadline=deadline, budget=budget)
                    for u, c in zip(active, clients, strict=True)
                )
            )
            wall = time.perf_counter() - start
            drain = await wait_drained(target.depth, config.drain_timeout_s)
            await probes.drain()
        stop.set()
        await sampling
    finally:
        for client in clients:
            await client.aclose()
    return LevelResult(
        concurrency,
        wall,
        rec.samples,
        baseline=base.samples,
        lags_s=probes.lags_s,
        lag_unfinished=probes.unfinished,
        lag_dropped=probes.dropped,
        queue=sampler.points,
        drain_s=drain,
        queue_started=sampler.started,
    )


async def run_load(target: Target, config: LoadConfig) -> list[LevelResult]:
    """Seed, then every level in turn; returns one result per level."""
    users = await make_users(target, config)
    await seed(target, users, config)
    results = []
    for concurrency in config.levels:
        result = await run_level(target, users, config, concurrency)
        print(
            f"{concurrency:>3} users: {result.throughput:6.1f} req/s, "
            f"P95 {result.overall().p95:7.0f} ms, errors {result.errors}, "
            f"lag samples {len(result.lags_s)}",
            file=sys.stderr,
            flush=True,
        )
        results.append(result)
    return results


def setup_lines(config: LoadConfig, external: bool) -> list[str]:
    server = (
        "Server given with --url."
        if external
        else "Server: `autonote serve` in a subprocess (uvicorn, 1 process, 2 in-process index "
        "workers, local ONNX embeddings all-MiniLM-L6-v2 int8, extractive chat, INFO JSON "
        "logs to a file) on an embedded SecantusDB; rate limit off; load generator in this "
        "process (httpx, one keep-alive connection per user) on the same 2 cores."
    )
    return [
        server,
        f"Levels {', '.join(map(str, config.levels))} concurrent users, {config.duration_s:.0f} s"
        f" each (≤ {config.max_requests} requests), closed loop without think time, after "
        f"{config.seed_notes} realistic notes (1–20 KB markdown) per user were indexed.",
        f"Index lag sampled on {100 * config.lag_share:.0f} % of writes; the queue drains "
        "between levels.",
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke-sized run")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--levels", type=int, nargs="+")
    parser.add_argument("--duration", type=float, help="seconds per level")
    parser.add_argument("--max-requests", type=int, help="request cap per level")
    parser.add_argument("--seed-notes", type=int, help="notes per user before the first level")
    parser.add_argument("--p95-ms", type=float, help="latency target for the knee")
    parser.add_argument("--url", help="drive this running server instead of starting one")
    parser.add_argument("--admin-token", default=ADMIN_TOKEN, help="its AUTONOTE_ADMIN_TOKEN")
    parser.add_argument("--mongodb-url", help="its database, to sample the queue exactly")
    parser.add_argument("--db", default="autonote", help="its MONGODB_DB")
    args = parser.parse_args(argv)
    config = LoadConfig.quick() if args.quick else LoadConfig()
    overrides = {
        "levels": tuple(args.levels) if args.levels else None,
        "duration_s": args.duration,
        "max_requests": args.max_requests,
        "seed_notes": args.seed_notes,
        "p95_ms": args.p95_ms,
    }
    config = replace(config, **{k: v for k, v in overrides.items() if v is not None})
    command = "python -m benchmarks.load " + " ".join(argv if argv is not None else sys.argv[1:])
    results = asyncio.run(_run(args, config))
    body = report(
        results,
        p95_ms=config.p95_ms,
        command=command.strip(),
        setup=setup_lines(config, external=args.url is not None),
        mix=", ".join(f"{k} {100 * v:.0f} %" for k, v in config.mix.items()),
    )
    print(body)
    if not args.no_write:
        update_section("load", body)
        update_claims(claims(results, config.p95_ms), command.strip())


async def _run(args: argparse.Namespace, config: LoadConfig) -> list[LevelResult]:
    if args.url:
        depth = (
            mongo_depth(args.mongodb_url, args.db) if args.mongodb_url else metrics_depth(args.url)
        )
        return await run_load(Target(args.url, args.admin_token, depth), config)
    with tempfile.TemporaryDirectory(prefix="autonote-load-") as tmp:
        async with local_target(Path(tmp)) as target:
            return await run_load(target, config)


if __name__ == "__main__":
    main()
