"""Fault (b): the database server SIGKILLed and restarted under load.

The app (served by uvicorn, real HTTP) talks to an embedded SecantusDB on a fixed port.
While clients write, read, list and search, the server is SIGKILLed: every request must fail
fast with 503 `database_unavailable` (bounded latency, never a 500, never a stack trace).
The server is restarted on the same port: the app recovers without a restart (requests
succeed, workers index again, the search index follows again) and no acknowledged write is
lost.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from pymongo import AsyncMongoClient

from api.cli.check import expectations
from api.db.embedded import EmbeddedMongo
from api.integrity import IntegrityChecker
from tests.conftest import ServedApp, running_app
from tests.faults.support import (
    NoteWriter,
    WriteLog,
    eventually,
    free_port,
    index_settled,
    latency_figures,
    record,
    verify_acknowledged,
    wait_all_indexed,
)

TIMEOUT_MS = 3000  # MONGODB_TIMEOUT_MS: the default


@dataclass
class Observed:
    """Every request of the load with its start and end time; phases are assigned
    afterwards from the outage windows (a request is "outage" only if it started after a
    kill and ended before the restart)."""

    requests: list[tuple[str, int, float, float, str]] = field(default_factory=list)
    windows: list[tuple[float, float]] = field(default_factory=list)  # (killed, restarted)

    def add(self, route: str, status: int, started: float, body: str) -> None:
        self.requests.append((route, status, started, time.monotonic(), body))

    def phase_of(self, started: float, ended: float) -> str:
        for killed, restarted in self.windows:
            if started >= killed and ended < restarted:
                return "outage"
            if started < restarted and ended >= killed:
                return "spanning"
        if self.windows and started >= self.windows[-1][1] + 1.0:
            return "after"
        return "before"

    def of(self, phase: str) -> list[tuple[str, int, float, str]]:
        return [
            (route, status, end - start, body)
            for route, status, start, end, body in self.requests
            if self.phase_of(start, end) == phase
        ]

    def statuses(self, phase: str) -> Counter[int]:
        return Counter(s for _, s, _, _ in self.of(phase))

    def latencies(self, phase: str, status: int | None = None) -> list[float]:
        return [t for _, s, t, _ in self.of(phase) if status in (None, s)]

    def first_success_after(self, since: float) -> float | None:
        ends = [end for _, s, start, end, _ in self.requests if s in (200, 201) and end >= since]
        return min(ends) - since if ends else None


async def reader(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    log: WriteLog,
    seen: Observed,
    stop: asyncio.Event,
    seed: int,
) -> None:
    """Reads: list, get one of the acknowledged notes, search."""
    rng = random.Random(seed)
    while not stop.is_set():
        acked = [n.note_id for n in log.notes if n.note_id]
        choice = rng.random()
        if choice < 0.3 or not acked:
            route, req = "list", client.get("/v1/notes?limit=20", headers=headers)
        elif choice < 0.7:
            route = "get"
            req = client.get(f"/v1/notes/{rng.choice(acked)}", headers=headers)
        else:
            route = "search"
            req = client.post("/v1/search", json={"query": "kernel cache"}, headers=headers)
        started = time.monotonic()
        resp = await req
        seen.add(route, resp.status_code, started, resp.text[:500])


async def writer(w: NoteWriter, seen: Observed, stop: asyncio.Event, log: WriteLog) -> None:
    while not stop.is_set():
        before = len(log.bodies)
        started = time.monotonic()
        status = await w.step()
        body = log.bodies[-1] if len(log.bodies) > before else ""
        seen.add("write", int(status) if status.isdigit() else 0, started, body)


async def search_finds(
    client: httpx.AsyncClient, headers: dict[str, str], word: str, note_id: str, timeout_s: float
) -> float:
    """Seconds until a keyword search for `word` returns `note_id`."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        resp = await client.post(
            "/v1/search", json={"query": word, "mode": "keyword"}, headers=headers
        )
        if resp.status_code == 200 and any(r["note_id"] == note_id for r in resp.json()["results"]):
            return time.monotonic() - started
        await asyncio.sleep(0.1)
    raise AssertionError(f"{word!r} not searchable within {timeout_s}s")


async def run_scenario(
    tmp_path: Path, make_settings: Any, stub_url: str, *, clients: int, outage_s: float,
    rounds: int,
) -> dict[str, Any]:  # fmt: skip
    port = free_port()
    server = EmbeddedMongo(tmp_path / "db", port=port)
    url = server.start()
    settings = make_settings(
        mongodb_url=url, mongodb_timeout_ms=TIMEOUT_MS, embedding_provider="openai",
        openai_api_key="sk-test", openai_base_url=stub_url, embedding_dimensions=256,
        autonote_index_poll_s=0.1, autonote_index_backoff_base_s=0.2,
        autonote_index_backoff_max_s=1.0, autonote_index_max_attempts=50,
    )  # fmt: skip
    log, seen = WriteLog(), Observed()
    recoveries: list[float] = []
    readyz_during: Counter[int] = Counter()
    try:
        with ServedApp(settings) as served:
            headers = {"Authorization": f"Bearer {served.new_user('faults')}"}
            async with httpx.AsyncClient(base_url=served.url, timeout=60) as client:
                stop = asyncio.Event()
                writers = [NoteWriter(client, headers, log, f"w{i}") for i in range(clients)]
                tasks = [asyncio.create_task(writer(w, seen, stop, log)) for w in writers]
                tasks += [
                    asyncio.create_task(reader(client, headers, log, seen, stop, i))
                    for i in range(clients)
                ]
                await asyncio.sleep(2)
                for _ in range(rounds):
                    killed = time.monotonic()
                    server.process.kill()  # type: ignore[union-attr]  # SIGKILL
                    server.process.wait()  # type: ignore[union-attr]
                    while time.monotonic() - killed < outage_s:
                        readyz_during[(await client.get("/readyz")).status_code] += 1
                        await asyncio.sleep(0.5)
                    restarted = time.monotonic()
                    server = EmbeddedMongo(tmp_path / "db", port=port)
                    assert server.start() == url
                    seen.windows.append((killed, restarted))

                    async def recovered(since: float = restarted) -> bool:
                        return seen.first_success_after(since) is not None

                    await eventually(recovered, 30, "a request succeeding after the restart")
                    recoveries.append(seen.first_success_after(restarted) or 0.0)
                    await asyncio.sleep(4)
                stop.set()
                await asyncio.gather(*tasks)

                verdict = await verify_acknowledged(client, headers, log)
                acked = sorted({n.note_id for n in log.notes if n.acked and n.note_id})
                converge_s = await wait_all_indexed(client, headers, acked, timeout_s=90)
                resp = await client.post(
                    "/v1/notes",
                    json={"title": "after", "content_md": "## New\n\nzymurgy after recovery"},
                    headers=headers,
                )
                assert resp.status_code == 201, resp.text
                searchable_s = await search_finds(
                    client, headers, "zymurgy", resp.json()["id"], timeout_s=30
                )
        checker_client: AsyncMongoClient = AsyncMongoClient(url, tz_aware=True)
        try:
            checked = checker_client[settings.mongodb_db]
            evicted_s = await eventually(lambda: index_settled(checked), 45, "index settled")
            report = await IntegrityChecker(checked, expectations(settings)).run()
        finally:
            await checker_client.close()
    finally:
        server.stop()

    outage = seen.of("outage")
    bad = [(r, s, b) for r, s, _, b in outage if s != 503 or "database_unavailable" not in b]
    assert not bad, f"outage answers other than 503 database_unavailable: {bad[:5]}"
    assert not any("Traceback" in b or 'File "' in b for _, _, _, b in outage)
    after = seen.statuses("after")
    assert set(after) <= {200, 201}, f"errors after recovery: {after}"
    assert verdict["lost"] == 0 and verdict["wrong_content"] == 0, verdict
    assert report.ok and not report.findings, report.to_dict()
    failure_latency = latency_figures(seen.latencies("outage", 503))
    assert failure_latency["max_ms"] < 4 * TIMEOUT_MS, "a request hung during the outage"
    return {
        "clients": f"{clients} writers + {clients} readers",
        "outages": rounds,
        "outage_s": outage_s,
        "requests_before/outage/spanning/after": "/".join(
            str(len(seen.of(p))) for p in ("before", "outage", "spanning", "after")
        ),
        "spanning_statuses": dict(seen.statuses("spanning")),
        "outage_statuses": dict(seen.statuses("outage")),
        "outage_503_latency": failure_latency,
        "readyz_during_outage": dict(readyz_during),
        "restart_to_first_success_s": [round(r, 2) for r in recoveries],
        "after_statuses": dict(after),
        "writes_attempted": log.attempted,
        "writes_acknowledged": log.acknowledged,
        "acknowledged_lost": verdict["lost"],
        "index_converged_s": round(converge_s, 2),
        "evictions_settled_after_s": round(evicted_s, 2),
        "new_note_searchable_s": round(searchable_s, 2),
        "check_violations": len(report.violations),
        "mongodb_timeout_ms": TIMEOUT_MS,
    }


async def test_database_killed_and_restarted_under_load(
    tmp_path: Path, make_settings: Any, openai_stub: Any
) -> None:
    figures = await run_scenario(
        tmp_path, make_settings, openai_stub.base_url, clients=3, outage_s=5, rounds=1
    )
    record(
        "b_db_sigkill",
        "Database server SIGKILLed and restarted under load (app not restarted)",
        figures,
        "Embedded SecantusDB (--sync-on-commit) on a fixed port; writers create/edit notes, "
        "readers list/get/search; the server is SIGKILLed for 5 s, then started again on the "
        "same port and data directory.",
    )


@pytest.mark.slow
async def test_database_killed_repeatedly(
    tmp_path: Path, make_settings: Any, openai_stub: Any
) -> None:
    figures = await run_scenario(
        tmp_path, make_settings, openai_stub.base_url, clients=6, outage_s=10, rounds=3
    )
    record(
        "b_db_sigkill_repeated",
        "Database server SIGKILLed 3 times under heavier load (slow variant)",
        figures,
        "6 writers + 6 readers; three 10 s outages.",
    )


async def test_note_mid_indexing_when_the_database_dies_is_not_stuck_behind_its_lease(
    tmp_path: Path, make_settings: Any, openai_stub: Any
) -> None:
    """The worker cannot record the failure while the database is down; once it is back the
    note must be retried promptly, not after its 120 s lease runs out. Pinned by the run
    itself: its failure is recorded on the note once the database is back (which releases
    the lease), and the note is indexed within half a lease (a bound no load reaches; the
    stuck note waited the whole lease)."""
    port = free_port()
    server = EmbeddedMongo(tmp_path / "db", port=port)
    url = server.start()
    settings = make_settings(
        mongodb_url=url, mongodb_timeout_ms=1000, embedding_provider="openai",
        openai_api_key="sk-test", openai_base_url=openai_stub.base_url, embedding_dimensions=64,
        autonote_index_poll_s=0.1, autonote_index_backoff_base_s=0.2,
        autonote_index_backoff_max_s=1.0,
    )  # fmt: skip
    lease_s = settings.autonote_index_lease_s
    assert lease_s == 120
    try:
        async with running_app(settings) as api:
            released = record_released_leases(api.container.indexing.reconciler.queue)
            headers = await api.new_user()
            openai_stub.set_delay(2.0, count=1)  # the first embedding call is in flight...
            resp = await api.client.post(
                "/v1/notes", json={"title": "t", "content_md": "## A\n\nbody"}, headers=headers
            )
            note_id = resp.json()["id"]
            await asyncio.sleep(0.5)
            server.process.kill()  # type: ignore[union-attr]  # ... when the database dies
            server.process.wait()  # type: ignore[union-attr]
            await asyncio.sleep(4.5)  # the write and the failure record both fail meanwhile
            server = EmbeddedMongo(tmp_path / "db", port=port)
            server.start()

            async def indexed() -> bool:
                r = await api.client.get(f"/v1/notes/{note_id}", headers=headers)
                return r.status_code == 200 and r.json()["index_status"] == "indexed"

            await eventually(indexed, lease_s / 2, "note indexed after the database returned")
            assert note_id in released, "the failed run released its lease"
    finally:
        server.stop()


def record_released_leases(queue: Any) -> list[str]:
    """Ids of the notes whose failed run released its lease (`IndexQueue.fail` matched)."""
    released: list[str] = []
    fail = queue.fail

    async def recording(note_id: Any, token: str, **kwargs: Any) -> Any:
        after = await fail(note_id, token, **kwargs)
        if after is not None and after["lease_token"] is None:
            released.append(str(note_id))
        return after

    queue.fail = recording
    return released
