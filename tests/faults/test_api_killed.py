"""Fault (a): the API process SIGKILLed during a stream of writes.

`autonote serve` runs as a subprocess with its own embedded database (MONGODB_URL unset, as
`make run` does); concurrent clients create and edit notes and remember every write the API
acknowledged. The API is SIGKILLed mid-stream (its embedded server gets the parent-death
signal) and started again on the same port and data directory. Every acknowledged write is
there with its content, everything gets indexed, and `autonote check` is clean.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN
from tests.faults.support import (
    ROOT,
    NoteWriter,
    ServeProcess,
    WriteLog,
    free_port,
    kill_embedded_leftover,
    latency_figures,
    record,
    verify_acknowledged,
    wait_all_indexed,
)


def serve_env(data_dir: Path, stub_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MONGODB_", "OPENAI_"))}
    env.update({
        "AUTONOTE_DATA_DIR": str(data_dir),
        "AUTONOTE_ADMIN_TOKEN": ADMIN_TOKEN,
        "AUTONOTE_CREATE_DEFAULT_USER": "false",
        "AUTONOTE_RATE_LIMIT_PER_MINUTE": "0",
        "EMBEDDING_PROVIDER": "openai",
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": stub_url,
        "EMBEDDING_DIMENSIONS": "256",
        # A note mid-indexing when the API died keeps its lease until expiry: short here.
        "AUTONOTE_INDEX_LEASE_S": "3",
        "AUTONOTE_INDEX_POLL_S": "0.1",
        "LOG_LEVEL": "WARNING",
        "LOG_JSON": "true",
    })  # fmt: skip
    return env


async def autonote_check(env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "api.cli", "check", "--json",
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode is not None
    assert out, err.decode()[-2000:]
    return proc.returncode, json.loads(out)


async def run_scenario(
    tmp_path: Path,
    stub_url: str,
    *,
    writers: int,
    kills: int,
    acks_per_cycle: int,
    converge_timeout_s: float = 90,
) -> dict[str, Any]:
    data_dir = tmp_path / "data"
    env = serve_env(data_dir, stub_url)
    serve = ServeProcess(env, free_port(), tmp_path / "serve.log")
    log = WriteLog()
    restarts: list[float] = []
    try:
        serve.start()
        await serve.wait_ready()
        async with httpx.AsyncClient(base_url=serve.url, timeout=10) as admin:
            resp = await admin.post(
                "/v1/admin/users",
                json={"name": "faults"},
                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            )
            assert resp.status_code == 201, resp.text
            headers = {"Authorization": f"Bearer {resp.json()['api_key']}"}
        clients = [NoteWriter(httpx.AsyncClient(), headers, log, f"w{i}") for i in range(writers)]
        for _ in range(kills):
            async with httpx.AsyncClient(base_url=serve.url, timeout=10) as client:
                for w in clients:
                    w.client = client
                stop = asyncio.Event()

                async def drive(w: NoteWriter, stop: asyncio.Event = stop) -> None:
                    while not stop.is_set():
                        if (await w.step()).startswith("transport"):
                            await asyncio.sleep(0.02)

                tasks = [asyncio.create_task(drive(w)) for w in clients]
                await log.wait_acknowledged(log.acknowledged + acks_per_cycle, timeout_s=60)
                serve.kill()  # SIGKILL while the writers are mid-request
                killed = time.monotonic()
                await asyncio.sleep(0.3)
                stop.set()
                await asyncio.gather(*tasks)
            serve.start()
            await serve.wait_ready()
            restarts.append(time.monotonic() - killed)
        async with httpx.AsyncClient(base_url=serve.url, timeout=10) as client:
            verdict = await verify_acknowledged(client, headers, log)
            acked_ids = sorted({n.note_id for n in log.notes if n.acked and n.note_id})
            backlog = 0
            for note_id in acked_ids:
                note = (await client.get(f"/v1/notes/{note_id}", headers=headers)).json()
                backlog += note["index_status"] != "indexed"
            converge_s = await wait_all_indexed(
                client, headers, acked_ids, timeout_s=converge_timeout_s
            )
            # And the restarted API takes writes again.
            w = NoteWriter(client, headers, log, "after")
            assert [await w.step() for _ in range(3)] == ["201", "201", "201"]
        code, report = await autonote_check(env)
    finally:
        serve.stop()
        kill_embedded_leftover(data_dir)
    acked_creates = sum(1 for n in log.notes if n.acked) - 3
    unacked = {k: v for k, v in log.statuses.items() if k not in ("200", "201")}
    assert not [k for k in unacked if k.startswith("5")], f"5xx answers: {log.bodies[:3]}"
    return {
        "writers": writers,
        "kills": kills,
        "writes_attempted": log.attempted - 3,
        "writes_acknowledged": log.acknowledged - 3,
        "writes_unacknowledged": dict(sorted(unacked.items())),
        "acknowledged_lost": verdict["lost"],
        "acknowledged_wrong_content": verdict["wrong_content"],
        "unacknowledged_creates_applied": report["notes_scanned"] - 3 - acked_creates,
        "kill_to_ready_s": [round(r, 2) for r in restarts],
        "not_indexed_at_last_restart": backlog,
        "index_converged_after_restart_s": round(converge_s, 2),
        "write_latency_acknowledged": latency_figures(log.latencies.get("201", [])),
        "check_exit_code": code,
        "check_violations": report["violations"],
        "check_notes_chunks": f"{report['notes_scanned']} / {report['chunks_scanned']}",
    }


def assert_survived(figures: dict[str, Any]) -> None:
    assert figures["acknowledged_lost"] == 0 and figures["acknowledged_wrong_content"] == 0
    assert figures["check_exit_code"] == 0 and figures["check_violations"] == 0


async def test_api_sigkilled_during_writes(tmp_path: Path, openai_stub: Any) -> None:
    figures = await run_scenario(
        tmp_path, openai_stub.base_url, writers=4, kills=1, acks_per_cycle=60
    )
    record(
        "a_api_sigkill",
        "API process SIGKILLed during concurrent writes (embedded DB), restarted",
        figures,
        "4 clients create (70 %) and edit (30 %) notes; SIGKILL after 60 acknowledged "
        "writes; `autonote serve` restarted on the same port and data directory.",
    )
    assert_survived(figures)


@pytest.mark.slow
async def test_api_sigkilled_repeatedly(tmp_path: Path, openai_stub: Any) -> None:
    figures = await run_scenario(
        tmp_path,
        openai_stub.base_url,
        writers=8,
        kills=4,
        acks_per_cycle=150,
        converge_timeout_s=600,
    )
    record(
        "a_api_sigkill_repeated",
        "API process SIGKILLed 4 times during concurrent writes (slow variant)",
        figures,
        "8 clients; SIGKILL after every 150 acknowledged writes, 4 times.",
    )
    assert_survived(figures)
