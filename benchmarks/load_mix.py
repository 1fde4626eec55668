"""The simulated users of the load benchmark (`benchmarks/load.py`) and what they measure.

- `SimUser` is one person with their own API key and notes, doing a realistic mix
  (`Mix`): create, small and large edits, read, list with pagination, hybrid search,
  extractive chat, and now and then trash or restore a note — a closed loop, no think time.
- `Recorder` keeps every request's route label, status and latency.
- `LagProbes` samples indexing lag: for a share of acknowledged writes, the time from the
  ack until `GET /v1/notes/{id}` reports `indexed` at (at least) that version.
- `QueueSampler` records the indexing queue depth (notes pending or indexing) every second.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from benchmarks.notes_api_load import NoteSpec, edited_content

# One closed-loop action per draw; weights are shares of actions (not of requests: a
# listing action pages through 1-3 pages).
DEFAULT_MIX: dict[str, float] = {
    "create": 0.10,
    "edit_small": 0.12,
    "edit_large": 0.04,
    "read": 0.24,
    "list": 0.14,
    "search": 0.22,
    "chat": 0.10,
    "trash": 0.02,
    "restore": 0.02,
}
TRANSPORT_ERROR = 0  # status recorded when no HTTP response came back (timeout, reset)
_WORD = re.compile(r"[A-Za-z]{4,}")


@dataclass(frozen=True, slots=True)
class Sample:
    """One request: route label, status, latency (s), and when it finished (monotonic)."""

    route: str
    status: int
    expected: int
    latency_s: float
    finished: float


@dataclass
class Recorder:
    """Every request of one load level."""

    samples: list[Sample] = field(default_factory=list)

    async def call(
        self,
        client: httpx.AsyncClient,
        route: str,
        method: str,
        url: str,
        expect: int = 200,
        **kwargs: Any,
    ) -> httpx.Response | None:
        """One timed request (body read); None when the transport failed."""
        start = time.perf_counter()
        try:
            resp = await client.request(method, url, **kwargs)
        except httpx.HTTPError:
            now = time.perf_counter()
            self.samples.append(Sample(route, TRANSPORT_ERROR, expect, now - start, now))
            return None
        now = time.perf_counter()
        self.samples.append(Sample(route, resp.status_code, expect, now - start, now))
        return resp


@dataclass
class LagProbes:
    """Indexing lag of sampled writes, measured by polling the note (outside the stats)."""

    client: httpx.AsyncClient
    share: float
    rng: random.Random
    max_in_flight: int = 6
    poll_s: float = 0.2
    timeout_s: float = 600.0
    lags_s: list[float] = field(default_factory=list)
    unfinished: int = 0
    dropped: int = 0  # trashed or edited away before it could be observed
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def maybe_probe(self, headers: dict[str, str], note_id: str, version: int) -> None:
        """Start timing this acknowledged write (with probability `share`)."""
        if len(self._tasks) >= self.max_in_flight or self.rng.random() >= self.share:
            return
        task = asyncio.create_task(self._probe(headers, note_id, version, time.perf_counter()))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _probe(
        self, headers: dict[str, str], note_id: str, version: int, acked: float
    ) -> None:
        while time.perf_counter() - acked < self.timeout_s:
            try:
                resp = await self.client.get(f"/v1/notes/{note_id}", headers=headers)
            except httpx.HTTPError:
                await asyncio.sleep(self.poll_s)
                continue
            if resp.status_code != 200:
                self.dropped += 1
                return
            note = resp.json()
            if note["status"] != "active":
                self.dropped += 1
                return
            if note["index_status"] == "indexed" and (note["indexed_version"] or 0) >= version:
                self.lags_s.append(time.perf_counter() - acked)
                return
            await asyncio.sleep(self.poll_s)
        self.unfinished += 1

    async def drain(self) -> None:
        """Wait for every probe to finish (each is bounded by `timeout_s`)."""
        if self._tasks:
            await asyncio.gather(*list(self._tasks))


@dataclass
class QueueSampler:
    """(seconds since start, notes pending or indexing) once per `interval_s`."""

    depth: Callable[[], Awaitable[int]]
    interval_s: float = 1.0
    points: list[tuple[float, int]] = field(default_factory=list)
    started: float = 0.0  # perf_counter of the first sample

    async def run(self, stop: asyncio.Event) -> None:
        start = self.started = time.perf_counter()
        while not stop.is_set():
            try:
                self.points.append((time.perf_counter() - start, await self.depth()))
            except Exception:  # a sampling hiccup must not end the benchmark
                pass
            try:
                await asyncio.wait_for(stop.wait(), self.interval_s)
            except TimeoutError:
                pass
        with contextlib.suppress(Exception):  # the state at the moment sampling stopped
            self.points.append((time.perf_counter() - start, await self.depth()))


@dataclass
class SimUser:
    """One user: their key, their notes (id → last acknowledged version) and a corpus."""

    name: str
    headers: dict[str, str]
    corpus: list[NoteSpec]
    rng: random.Random
    notes: dict[str, int] = field(default_factory=dict)
    trashed: list[str] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)
    created: int = 0

    def _spec(self) -> NoteSpec:
        spec = self.corpus[self.created % len(self.corpus)]
        self.created += 1
        return spec

    def _words(self, n: int) -> str:
        source = self.texts[self.rng.choice(list(self.texts))] if self.texts else "notes"
        words = _WORD.findall(source[:4000]) or ["notes"]
        return " ".join(self.rng.choice(words) for _ in range(n))

    async def create(self, client: httpx.AsyncClient, rec: Recorder, probes: LagProbes) -> None:
        spec = self._spec()
        body = {"title": spec.title, "content_md": spec.content_md, "tags": spec.tags}
        resp = await rec.call(client, "POST /v1/notes", "POST", "/v1/notes", 201, json=body)
        if resp is not None and resp.status_code == 201:
            note = resp.json()
            self.notes[note["id"]] = note["version"]
            self.texts[note["id"]] = spec.content_md
            probes.maybe_probe(self.headers, note["id"], note["version"])

    async def edit(
        self, client: httpx.AsyncClient, rec: Recorder, probes: LagProbes, *, large: bool
    ) -> None:
        if not self.notes:
            return await self.create(client, rec, probes)
        note_id = self.rng.choice(list(self.notes))
        old = self.texts[note_id]
        if large:  # a rewrite: the second half replaced by another document's text
            route = "PATCH /v1/notes/{id} (large edit)"
            content = old[: len(old) // 2] + "\n\n" + self._spec().content_md[: len(old) // 2]
        else:
            route = "PATCH /v1/notes/{id} (small edit)"
            content = edited_content(old, self.rng.randrange(10**6))
        resp = await rec.call(
            client, route, "PATCH", f"/v1/notes/{note_id}", json={"content_md": content}
        )
        if resp is not None and resp.status_code == 200:
            self.notes[note_id] = resp.json()["version"]
            self.texts[note_id] = content
            probes.maybe_probe(self.headers, note_id, self.notes[note_id])

    async def read(self, client: httpx.AsyncClient, rec: Recorder) -> None:
        if self.notes:
            note_id = self.rng.choice(list(self.notes))
            await rec.call(client, "GET /v1/notes/{id}", "GET", f"/v1/notes/{note_id}")

    async def list_pages(self, client: httpx.AsyncClient, rec: Recorder) -> None:
        params: dict[str, Any] = {"limit": 10}
        for page in range(self.rng.randint(1, 3)):
            route = "GET /v1/notes (first page)" if page == 0 else "GET /v1/notes (next page)"
            resp = await rec.call(client, route, "GET", "/v1/notes", params=params)
            if resp is None or resp.status_code != 200 or not resp.json()["next_cursor"]:
                return
            params["cursor"] = resp.json()["next_cursor"]

    async def search(self, client: httpx.AsyncClient, rec: Recorder) -> None:
        body = {"query": self._words(self.rng.randint(2, 5)), "limit": 5, "mode": "hybrid"}
        await rec.call(client, "POST /v1/search (hybrid)", "POST", "/v1/search", json=body)

    async def chat(self, client: httpx.AsyncClient, rec: Recorder) -> None:
        body = {"message": f"What do my notes say about {self._words(3)}?"}
        await rec.call(client, "POST /v1/chat (extractive)", "POST", "/v1/chat", json=body)

    async def trash(self, client: httpx.AsyncClient, rec: Recorder) -> None:
        if len(self.notes) > 1:
            note_id = self.rng.choice(list(self.notes))
            resp = await rec.call(client, "DELETE /v1/notes/{id}", "DELETE", f"/v1/notes/{note_id}")
            if resp is not None and resp.status_code == 200:
                self.notes.pop(note_id)
                self.trashed.append(note_id)

    async def restore(self, client: httpx.AsyncClient, rec: Recorder, probes: LagProbes) -> None:
        if not self.trashed:
            return await self.trash(client, rec)
        note_id = self.trashed.pop(self.rng.randrange(len(self.trashed)))
        route = "POST /v1/notes/{id}/restore"
        resp = await rec.call(client, route, "POST", f"/v1/notes/{note_id}/restore")
        if resp is not None and resp.status_code == 200:
            self.notes[note_id] = resp.json()["version"]
            probes.maybe_probe(self.headers, note_id, self.notes[note_id])

    async def act(
        self, action: str, client: httpx.AsyncClient, rec: Recorder, probes: LagProbes
    ) -> None:
        """Perform one action of the mix."""
        if action == "create":
            await self.create(client, rec, probes)
        elif action in ("edit_small", "edit_large"):
            await self.edit(client, rec, probes, large=action == "edit_large")
        elif action == "read":
            await self.read(client, rec)
        elif action == "list":
            await self.list_pages(client, rec)
        elif action == "search":
            await self.search(client, rec)
        elif action == "chat":
            await self.chat(client, rec)
        elif action == "trash":
            await self.trash(client, rec)
        elif action == "restore":
            await self.restore(client, rec, probes)
        else:
            raise ValueError(f"unknown action {action!r}")


async def run_user(
    user: SimUser,
    client: httpx.AsyncClient,
    rec: Recorder,
    probes: LagProbes,
    mix: dict[str, float],
    *,
    deadline: float,
    budget: list[int],
) -> None:
    """Closed loop until `deadline` (perf_counter) or the shared request budget is spent."""
    actions, weights = list(mix), list(mix.values())
    while time.perf_counter() < deadline and budget[0] > 0:
        before = len(rec.samples)
        await user.act(user.rng.choices(actions, weights)[0], client, rec, probes)
        budget[0] -= len(rec.samples) - before
