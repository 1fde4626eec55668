"""Load-generation pieces of the notes-API benchmark (`benchmarks/notes_api.py`).

- `make_corpus()` builds realistic markdown notes of 1–20 KB (log-uniform sizes) with tags.
- `ServedApp` runs the real server — `python -m api.cli serve`, i.e. uvicorn with the app
  factory, exactly what `make run` starts — in a subprocess, configured through environment
  variables, so the load generator and the server do not share a GIL.
- `run_jobs()` drives it over HTTP with httpx (keep-alive connections) at a given
  concurrency: each job is an async function making one or more timed requests.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks.common import REPO_ROOT
from benchmarks.sample_note import realistic_note

# One-line edits appended by content PATCHes; bytes per generated line (measured on
# `realistic_note`): ~82, so 1 KB ≈ 12 lines and 20 KB ≈ 245 lines.
BYTES_PER_LINE = 82
TAG_POOL = tuple(f"project-{i}" for i in range(10))
FILTER_TAG = "shared"  # on ~25 % of the notes: the tag-filtered listing's selectivity
FILTER_SHARE = 0.25
PAGE = 20  # notes per listing page


@dataclass(frozen=True, slots=True)
class NoteSpec:
    """A note to create."""

    title: str
    content_md: str
    tags: list[str]


def make_corpus(n: int, seed: int = 2, min_kb: float = 1.0, max_kb: float = 20.0) -> list[NoteSpec]:
    """`n` realistic notes with log-uniform sizes in [min_kb, max_kb] KB and 1–3 tags."""
    rng = random.Random(seed)
    notes = []
    for i in range(n):
        kb = math.exp(rng.uniform(math.log(min_kb), math.log(max_kb)))
        content = _note_of_size(kb * 1024, seed * 100_003 + i)
        tags = [rng.choice(TAG_POOL)]
        if rng.random() < FILTER_SHARE:
            tags.append(FILTER_TAG)
        if rng.random() < 0.3:
            tags.append(f"topic-{rng.randrange(50)}")
        notes.append(
            NoteSpec(
                title=f"Note {i}: {rng.choice(('runbook', 'meeting', 'design', 'journal'))}",
                content_md=content,
                tags=list(dict.fromkeys(tags)),
            )
        )
    return notes


def _note_of_size(target_bytes: float, seed: int) -> str:
    """A realistic note within 10 % of `target_bytes` (line count refined from a first try)."""
    lines = max(8, round(target_bytes / BYTES_PER_LINE))
    for _ in range(6):
        text = realistic_note(lines, seed=seed)
        size = len(text.encode())
        if abs(size - target_bytes) <= 0.1 * target_bytes:
            break
        lines = max(8, round(lines * target_bytes / size))
    return text


def edited_content(content: str, n: int) -> str:
    """A one-paragraph content change (a new closing paragraph): the version goes up."""
    return f"{content.rstrip()}\n\nEdit {n}: the rollout moved to the next maintenance window.\n"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServedApp:
    """`autonote serve` in a subprocess on 127.0.0.1 with the given environment."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = env
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 90.0) -> ServedApp:
        """Start the server and return once `/readyz` answers 200."""
        env = {**os.environ, **self.env}
        env.pop("OPENAI_API_KEY", None)
        with self.log_path.open("ab") as logf:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "api.cli",
                    "serve",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                ],
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"server exited at start-up:\n{tail}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server not ready within {timeout_s}s")

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (graceful: workers stop, clients close), SIGKILL after `timeout_s`."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> ServedApp:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class UnexpectedStatus(RuntimeError):
    """A benchmarked request failed: timing errors would flatter the numbers."""


@dataclass
class Recorder:
    """Per-request latencies (seconds) of one phase."""

    samples: list[float] = field(default_factory=list)

    async def call(
        self,
        client: httpx.AsyncClient,
        method: str,
        url: str,
        expect: int = 200,
        **kwargs: Any,
    ) -> httpx.Response:
        """One timed request (body fully read); raises on an unexpected status."""
        start = time.perf_counter()
        resp = await client.request(method, url, **kwargs)
        self.samples.append(time.perf_counter() - start)
        if resp.status_code != expect:
            raise UnexpectedStatus(f"{method} {url} → {resp.status_code}: {resp.text[:300]}")
        return resp


Job = Callable[[httpx.AsyncClient, Recorder], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class PhaseResult:
    """Latencies and wall time of a phase run at some concurrency."""

    samples: list[float]
    wall_s: float
    concurrency: int

    @property
    def throughput(self) -> float:
        """Requests per second over the phase's wall time."""
        return len(self.samples) / self.wall_s if self.wall_s > 0 else 0.0


async def run_jobs(client: httpx.AsyncClient, jobs: Iterable[Job], concurrency: int) -> PhaseResult:
    """Run `jobs` with `concurrency` workers pulling from one queue; time every request."""
    pending = iter(list(jobs))
    recorder = Recorder()

    async def worker() -> None:
        for job in pending:  # a shared iterator: each job runs once
            await job(client, recorder)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return PhaseResult(recorder.samples, time.perf_counter() - start, concurrency)


MongoOp = Callable[[Any], Awaitable[None]]


async def run_pymongo(
    mongo_url: str, db_name: str, ops: list[MongoOp], concurrency: int
) -> PhaseResult:
    """Time each op (a PyMongo call on the `notes` collection, from this process, straight
    to the same server) with `concurrency` workers: the database floor under a route."""
    from pymongo import AsyncMongoClient

    client: AsyncMongoClient = AsyncMongoClient(mongo_url, maxPoolSize=max(concurrency, 1))
    try:
        notes = client[db_name].notes
        await notes.find_one({}, {"_id": 1})  # connect outside the timing
        pending = iter(ops)
        samples: list[float] = []

        async def worker() -> None:
            for op in pending:
                start = time.perf_counter()
                await op(notes)
                samples.append(time.perf_counter() - start)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return PhaseResult(samples, time.perf_counter() - start, concurrency)
    finally:
        await client.close()


def http_client(base_url: str, concurrency: int, headers: dict[str, str]) -> httpx.AsyncClient:
    """A keep-alive client with one pooled connection per concurrent worker."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return httpx.AsyncClient(base_url=base_url, headers=headers, limits=limits, timeout=120)


@dataclass(frozen=True, slots=True)
class Sizes:
    """How much work each phase does."""

    notes: int = 1000
    baseline: int = 150  # per baseline, per concurrency level, before and after the routes
    gets: int = 200  # per concurrency level
    list_requests: int = 60  # random pages per concurrency level and filter
    patches: int = 100  # per kind and concurrency level, each on a note not patched before
    concurrency: int = 8

    def __post_init__(self) -> None:
        if 4 * self.patches > self.notes:
            raise ValueError("4 PATCH series need 4 × patches distinct notes")

    @classmethod
    def quick(cls) -> Sizes:
        return cls(notes=40, baseline=30, gets=40, list_requests=8, patches=10, concurrency=4)


@dataclass
class ModeResult:
    """Every series of one mode: {(route, concurrency): PhaseResult}."""

    mode: str
    phases: dict[tuple[str, int], PhaseResult] = field(default_factory=dict)
    notes_indexed: int = 0
    notes_total: int = 0
    chunks: int = 0
    wall_s: float = 0.0
    load: list[float] = field(default_factory=list)  # 1-min load average, start and end
    list_plan: str = ""

    def add(self, route: str, result: PhaseResult) -> None:
        key = (route, result.concurrency)
        if key in self.phases:  # baselines are measured twice: pool the samples
            old = self.phases[key]
            result = PhaseResult(
                old.samples + result.samples, old.wall_s + result.wall_s, result.concurrency
            )
        self.phases[key] = result
