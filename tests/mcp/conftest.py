"""What the MCP tests share: two users with indexed notes (through the REST API of an
in-process app), and the SDK's own client over streamable HTTP to that app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from tests.conftest import Api
from tests.helpers import wait_indexed

BACKUPS = """## Nightly backup

The nightly pg_dump runs at 02:00 UTC and uploads to the ops-backups bucket.

## Restore

To restore, download the latest dump and run pg_restore with --clean into a fresh database.
"""
GARDEN = """## Tomatoes

Plant the tomato seedlings in May, basil between the rows.
"""
SECRET = """## Vault

The zebrafinch passphrase opens the vault; only Bob knows the zebrafinch code.
"""


@dataclass
class Seeded:
    """Alice's notes (`backups`, `garden`) and Bob's (`secret`), all indexed."""

    alice: dict[str, str]  # auth headers
    bob: dict[str, str]
    backups: dict[str, Any]
    garden: dict[str, Any]
    secret: dict[str, Any]

    @property
    def alice_key(self) -> str:
        return self.alice["Authorization"].removeprefix("Bearer ")


async def add_note(api: Api, headers: dict[str, str], title: str, content: str) -> dict[str, Any]:
    r = await api.client.post(
        "/v1/notes", json={"title": title, "content_md": content}, headers=headers
    )
    assert r.status_code == 201, r.text
    return await wait_indexed(api, headers, r.json()["id"])


async def seed(api: Api) -> Seeded:
    alice, bob = await api.new_user("alice"), await api.new_user("bob")
    return Seeded(
        alice=alice,
        bob=bob,
        backups=await add_note(api, alice, "Postgres backups", BACKUPS),
        garden=await add_note(api, alice, "Garden plan", GARDEN),
        secret=await add_note(api, bob, "Bob's vault", SECRET),
    )


@asynccontextmanager
async def http_mcp(api: Api, headers: dict[str, str], mode: str = "auto") -> AsyncIterator[Client]:
    """The SDK's client on the app's `/mcp`, through an ASGI transport, with `headers`."""
    transport = httpx2.ASGITransport(app=api.app)
    http = httpx2.AsyncClient(transport=transport, base_url="http://test", headers=headers)
    async with (
        http,
        Client(streamable_http_client("http://test/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


def ok(result: CallToolResult) -> Any:
    """A successful tool result's structured content."""
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    """A failed tool result's message."""
    assert result.is_error, result.structured_content
    return " ".join(getattr(c, "text", "") for c in result.content)
