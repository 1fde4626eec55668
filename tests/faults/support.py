"""Shared machinery of the fault scenarios: a client that writes notes and remembers exactly
which writes were acknowledged, latency bookkeeping, the `autonote serve` subprocess, and the
recording of each scenario's figures (benchmarks/.data/faults/*.json, and the `faults`
section of docs/benchmarks/faults.md with its claim rows when AUTONOTE_FAULTS_REPORT=1)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from tests.helpers import paragraph

ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = ROOT / "benchmarks" / ".data" / "faults"
REPORT_ENV = "AUTONOTE_FAULTS_REPORT"
COMMAND = f"{REPORT_ENV}=1 .venv/bin/pytest tests/faults -m 'slow or not slow' -q"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def eventually(
    check: Callable[[], Awaitable[bool]], timeout_s: float, what: str, interval_s: float = 0.05
) -> float:
    """Poll `check` until it returns True; returns the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if await check():
            return time.monotonic() - started
        await asyncio.sleep(interval_s)
    raise AssertionError(f"{what}: not within {timeout_s}s")


# ---- writes and what was acknowledged ---------------------------------------------------
@dataclass
class NoteHistory:
    """Every content a client sent for one note, in order, and which were acknowledged."""

    note_id: str | None = None
    attempts: list[tuple[str, bool]] = field(default_factory=list)  # (content, acked)

    @property
    def acked(self) -> bool:
        return any(ok for _, ok in self.attempts)

    def allowed_contents(self) -> set[str]:
        """What the stored note may hold: the last acknowledged content, or any content
        sent after it (a write can be applied and its answer lost)."""
        last = max(i for i, (_, ok) in enumerate(self.attempts) if ok)
        return {content for content, _ in self.attempts[last:]}


@dataclass
class WriteLog:
    """Outcome of every write a scenario attempted."""

    notes: list[NoteHistory] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    bodies: list[str] = field(default_factory=list)  # error bodies (for leak checks)
    progress: asyncio.Event = field(default_factory=asyncio.Event)

    def observe(self, outcome: str, seconds: float, body: str | None = None) -> None:
        self.progress.set()
        self.statuses[outcome] += 1
        self.latencies.setdefault(outcome, []).append(seconds)
        if body is not None and len(self.bodies) < 200:
            self.bodies.append(body)

    async def wait_acknowledged(self, count: int, timeout_s: float) -> None:
        """Until `count` writes were acknowledged (AssertionError after `timeout_s`)."""
        deadline = time.monotonic() + timeout_s
        while self.acknowledged < count:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"only {self.acknowledged} acknowledged: {self.statuses}")
            self.progress.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.progress.wait(), timeout=left)

    @property
    def attempted(self) -> int:
        return sum(len(n.attempts) for n in self.notes)

    @property
    def acknowledged(self) -> int:
        return sum(ok for n in self.notes for _, ok in n.attempts)


class NoteWriter:
    """One client: creates notes and edits its own notes, one request at a time, recording
    every attempt before sending it and marking it acknowledged on a 200/201."""

    def __init__(
        self, client: httpx.AsyncClient, headers: dict[str, str], log: WriteLog, name: str
    ) -> None:
        self.client = client
        self.headers = headers
        self.log = log
        self.name = name
        self.rng = random.Random(name)
        self.mine: list[NoteHistory] = []
        self.count = 0

    def _content(self) -> str:
        self.count += 1
        return f"## {self.name} write {self.count}\n\n{paragraph(self.rng, 40)}\n"

    async def step(self) -> str:
        """One write (create 70 %, edit 30 %); returns its outcome label."""
        acked_notes = [n for n in self.mine if n.note_id is not None]
        content = self._content()
        if acked_notes and self.rng.random() < 0.3:
            history = self.rng.choice(acked_notes)
            history.attempts.append((content, False))
            method, url, body = "PATCH", f"/v1/notes/{history.note_id}", {"content_md": content}
        else:
            history = NoteHistory(attempts=[(content, False)])
            self.mine.append(history)
            self.log.notes.append(history)
            method, url, body = "POST", "/v1/notes", {"title": self.name, "content_md": content}
        started = time.perf_counter()
        try:
            resp = await self.client.request(method, url, json=body, headers=self.headers)
        except httpx.HTTPError as exc:
            outcome = f"transport:{type(exc).__name__}"
            self.log.observe(outcome, time.perf_counter() - started)
            return outcome
        elapsed = time.perf_counter() - started
        if resp.status_code in (200, 201):
            history.attempts[-1] = (content, True)
            if history.note_id is None:
                history.note_id = resp.json()["id"]
            self.log.observe(str(resp.status_code), elapsed)
        else:
            self.log.observe(str(resp.status_code), elapsed, resp.text)
        return str(resp.status_code)


async def verify_acknowledged(
    client: httpx.AsyncClient, headers: dict[str, str], log: WriteLog
) -> dict[str, int]:
    """Read back every acknowledged note: present, with an allowed content. Returns counts
    (`lost` must be 0). An unacknowledged create that was applied is found by the caller
    through the list endpoint, if it cares."""
    lost = wrong = present = 0
    for history in log.notes:
        if not history.acked:
            continue
        resp = await client.get(f"/v1/notes/{history.note_id}", headers=headers)
        if resp.status_code != 200:
            lost += 1
            continue
        if resp.json()["content_md"] in history.allowed_contents():
            present += 1
        else:
            wrong += 1
    return {"present": present, "lost": lost, "wrong_content": wrong}


async def wait_all_indexed(
    client: httpx.AsyncClient, headers: dict[str, str], note_ids: list[str], timeout_s: float
) -> float:
    """Poll until every note is indexed at its own version; returns the seconds it took."""
    started = time.monotonic()
    remaining = set(note_ids)
    while remaining:
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"{len(remaining)} notes not indexed within {timeout_s}s")
        for note_id in list(remaining):
            resp = await client.get(f"/v1/notes/{note_id}", headers=headers)
            doc = resp.json() if resp.status_code == 200 else {}
            if doc.get("index_status") == "failed":
                raise AssertionError(f"note {note_id} failed: {doc.get('index_error')}")
            if doc.get("index_status") == "indexed" and doc["indexed_version"] == doc["version"]:
                remaining.discard(note_id)
        if remaining:
            await asyncio.sleep(0.1)
    return time.monotonic() - started


async def index_settled(db: Any) -> bool:
    """No note queued or being indexed, and none with old versions still to evict: indexed
    is not settled, since a commit is followed by the eviction of the old version (a commit
    whose reply a kill lost is evicted once its run sees the database again; the sweep,
    every 30 s, is the backstop)."""
    return not await db.notes.count_documents(
        {"$or": [{"index_status": {"$in": ["pending", "indexing"]}}, {"evict_pending": True}]}
    )


async def integrity_after_convergence(api: Any, timeout_s: float = 60) -> Any:
    """Wait until no note is queued or being indexed, then run the integrity checker on
    the app's database; returns the report."""
    from api.integrity import Expectations, IntegrityChecker
    from api.providers import embedding_model_key

    db = api.container.db
    await eventually(lambda: index_settled(db), timeout_s, "indexing converged")
    embedder = api.container.embedder
    expect = Expectations(embedding_model_key(embedder), embedder.dimensions)
    return await IntegrityChecker(db, expect).run()


# ---- the `autonote serve` subprocess --------------------------------------------------
class ServeProcess:
    """`python -m api.cli serve` on a fixed port, its output in a log file."""

    def __init__(self, env: dict[str, str], port: int, log_path: Path) -> None:
        self.env = env
        self.port = port
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with self.log_path.open("ab") as logf:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "api.cli", "serve", "--port", str(self.port)],
                cwd=ROOT, env=self.env, stdout=logf, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip

    async def wait_ready(self, timeout_s: float = 90) -> float:
        """Seconds until /readyz answers 200 (fails if the process exits)."""
        started = time.monotonic()
        async with httpx.AsyncClient(base_url=self.url, timeout=2) as client:
            while time.monotonic() - started < timeout_s:
                assert self.proc is not None
                if self.proc.poll() is not None:
                    raise AssertionError(f"serve exited {self.proc.returncode}:\n{self.tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get("/readyz")).status_code == 200:
                        return time.monotonic() - started
                await asyncio.sleep(0.1)
        raise AssertionError(f"serve not ready within {timeout_s}s:\n{self.tail()}")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def kill_embedded_leftover(data_dir: Path) -> None:
    """Stop the embedded server a killed `serve` left behind (normally its parent-death
    signal already did)."""
    from api.db.embedded import _is_secantus

    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        pid = int(json.loads((data_dir / "embedded.json").read_text())["pid"])
        if _is_secantus(pid):
            os.kill(pid, signal.SIGKILL)


# ---- results ----------------------------------------------------------------------------
def record(scenario: str, title: str, figures: dict[str, Any], notes: str = "") -> None:
    """Store a scenario's figures; with AUTONOTE_FAULTS_REPORT=1 also rewrite the `faults`
    section of docs/benchmarks/faults.md and its claim rows from every stored scenario."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    payload = {
        "scenario": scenario,
        "title": title,
        "figures": figures,
        "notes": notes,
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    path = RESULTS_DIR / f"{scenario}.json"
    lost = figures.get("acknowledged_lost", figures.get("acknowledged_lost_after_restart"))
    if lost is not None:
        # Losses can be intermittent: keep the recent runs' counts, not just the last one.
        previous: list[Any] = []
        if path.exists():
            previous = json.loads(path.read_text()).get("lost_history", [])
        payload["lost_history"] = [*previous, lost][-20:]
    path.write_text(json.dumps(payload, indent=2, default=str))
    if os.environ.get(REPORT_ENV) == "1":
        from benchmarks.common import update_claims, update_section
        from tests.faults.report import faults_claims, faults_section

        results = [json.loads(p.read_text()) for p in sorted(RESULTS_DIR.glob("*.json"))]
        update_section("faults", faults_section(results, COMMAND))
        update_claims(faults_claims(results), COMMAND.replace(".venv/bin/", ""))


def latency_figures(values: list[float]) -> dict[str, float]:
    """n, p50, p95 and max in milliseconds."""
    return {
        "n": len(values),
        "p50_ms": round(percentile(values, 0.5) * 1000, 1),
        "p95_ms": round(percentile(values, 0.95) * 1000, 1),
        "max_ms": round(max(values, default=0.0) * 1000, 1),
        "mean_ms": round(statistics.fmean(values) * 1000, 1) if values else 0.0,
    }
