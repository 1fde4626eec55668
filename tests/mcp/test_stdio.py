"""`autonote mcp` spawned as a subprocess on the test database and driven over stdio by
the SDK's own client, acting as the user of the key it is given: the tools on real notes,
isolation, the write permission (--allow-writes), bad arguments, and a refused key."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from tests.conftest import running_app
from tests.helpers import wait_indexed
from tests.mcp import scenarios
from tests.mcp.conftest import seed

ROOT = Path(__file__).resolve().parents[2]


def cli_env(settings: Any, **extra: str) -> dict[str, str]:
    """The environment of `autonote` for the test's database, nothing inherited that could
    point it elsewhere."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "MONGODB_", "AUTONOTE_", "CHUNKING_", "EMBEDDING_"))
    }
    return base | {
        "PYTHONPATH": str(ROOT),
        "MONGODB_URL": str(settings.mongodb_url),
        "MONGODB_DB": settings.mongodb_db,
        "AUTONOTE_DATA_DIR": str(settings.autonote_data_dir),
        "EMBEDDING_PROVIDER": "local",
        "LOG_LEVEL": "WARNING",
        "LOG_JSON": "true",
        **extra,
    }


@asynccontextmanager
async def stdio_mcp(settings: Any, key: str, *flags: str) -> AsyncIterator[Client]:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "api.cli", "mcp", *flags],
        env=cli_env(settings, AUTONOTE_API_KEY=key),
        cwd=str(ROOT),
    )
    async with Client(server) as client:
        yield client


async def test_read_tools_isolation_and_bad_arguments(make_settings: Any) -> None:
    settings = make_settings()
    async with running_app(settings) as api:
        s = await seed(api)
        async with stdio_mcp(settings, s.alice_key) as client:
            await scenarios.check_tools_listed(client, writes=False)
            await scenarios.check_read_tools(client, s)
            await scenarios.check_resources(client, s)
            await scenarios.check_isolation(client, s)
            await scenarios.check_bad_arguments(client, s)
            await scenarios.check_writes_refused(client, s)


async def test_allow_writes(make_settings: Any) -> None:
    settings = make_settings()
    async with running_app(settings) as api:
        s = await seed(api)
        async with stdio_mcp(settings, s.alice_key, "--allow-writes") as client:
            await scenarios.check_tools_listed(client, writes=True)
            note_id = await scenarios.check_writes(client, s)
        note = await wait_indexed(api, s.alice, note_id)
        assert note["content_md"].endswith("A new line.")
        assert (await api.client.get(f"/v1/notes/{note_id}", headers=s.bob)).status_code == 404


def test_a_refused_key_exits_2_before_serving(make_settings: Any, tmp_path: Path) -> None:
    settings = make_settings()
    for key in ("an_not-a-key", ""):
        res = subprocess.run(
            [sys.executable, "-m", "api.cli", "mcp"],
            env=cli_env(settings, AUTONOTE_API_KEY=key, AUTONOTE_DATA_DIR=str(tmp_path)),
            cwd=ROOT,
            input="",
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 2, (res.stdout[-500:], res.stderr[-500:])
        assert res.stdout == "" and "Traceback" not in res.stderr
        expected = "invalid or revoked api key" if key else "no API key"
        assert expected in res.stderr, res.stderr[-500:]
