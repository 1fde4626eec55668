"""`autonote serve` believes X-Forwarded-For only from AUTONOTE_TRUSTED_PROXIES.

uvicorn's default trusted 127.0.0.1: any local process could send each wrong admin token
under a new X-Forwarded-For address and never reach the per-client throttle. The real
server process is started, as an operator would."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import httpx
import pytest

from tests.faults.support import ServeProcess, free_port

ADMIN = "admin-" + uuid.uuid4().hex


async def _statuses(
    mongo_url: str, tmp_path: Path, trusted: str, host: str
) -> tuple[list[int], str]:
    port = free_port()
    env = {
        **os.environ,
        "MONGODB_URL": mongo_url,
        "MONGODB_DB": f"t_{uuid.uuid4().hex[:12]}",
        "AUTONOTE_DATA_DIR": str(tmp_path / "data"),
        "AUTONOTE_ADMIN_TOKEN": ADMIN,
        "AUTONOTE_RATE_LIMIT_PER_MINUTE": "5",
        "AUTONOTE_TRUSTED_PROXIES": trusted,
        "AUTONOTE_HOST": host,
        "AUTONOTE_CREATE_DEFAULT_USER": "false",
        "AUTONOTE_INDEX_WORKERS": "0",
        "EMBEDDING_PROVIDER": "local",
    }
    server = ServeProcess(env, port, tmp_path / f"serve-{port}.log")
    server.start()
    try:
        await server.wait_ready()
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            statuses = []
            for i in range(12):
                r = await client.post(
                    "/v1/admin/users",
                    json={"name": "x"},
                    headers={"Authorization": "Bearer wrong", "X-Forwarded-For": f"10.0.0.{i}"},
                )
                statuses.append(r.status_code)
    finally:
        server.stop()
    return statuses, server.log_path.read_text()


@pytest.mark.parametrize(
    ("trusted", "host", "throttled"),
    [("", "127.0.0.1", True), ("127.0.0.1", "0.0.0.0", False)],
    ids=["default", "behind_proxy"],
)
def test_forwarded_addresses_count_only_from_trusted_proxies(
    mongo_url: str, tmp_path: Path, trusted: str, host: str, throttled: bool
) -> None:
    statuses, log = asyncio.run(_statuses(mongo_url, tmp_path, trusted, host))
    # Listening beyond loopback with no metrics token: said once at start-up.
    assert ("metrics.unprotected" in log) is (host == "0.0.0.0"), log[-2000:]
    assert set(statuses) <= {401, 429}
    # Default: every request is the one local client, throttled after 5 wrong tokens.
    # Behind a proxy the operator named: 12 different clients, one wrong token each.
    assert (429 in statuses) is throttled, statuses
