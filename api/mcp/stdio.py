"""The MCP server over stdio (`autonote mcp`): the app's services in this process, acting
as the user of one API key. Stdout carries only MCP messages (logs go to stderr)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from api.config import Settings
from api.container import build_container
from api.mcp.server import McpAccess, UserOf, build_server
from api.mcp.tools import Services
from api.users.service import UsersService
from api.users.types import User


def key_user(users: UsersService, key: str) -> UserOf:
    """The key's user, checked at every call: a revoked key stops working at once, and
    each call counts against the key's rate limit as a `/v1` request does."""
    authorization = f"Bearer {key}"

    async def user_of(_: ServerRequestContext[Any, Any]) -> User:
        return await users.authenticate(authorization)

    return user_of


async def serve_stdio(settings: Settings, key: str, *, allow_writes: bool) -> None:
    """Open the database (attaching to the embedded server `autonote serve` started, or
    starting it), check the key, run indexing workers as `serve` does (so notes written
    here are indexed without a server), and answer MCP on stdin/stdout until stdin ends.
    An invalid key raises `Unauthorized` before anything is read from stdin."""
    async with AsyncExitStack() as stack:
        container = await build_container(settings, stack)
        await container.users.authenticate(f"Bearer {key}")
        if settings.chunking_enabled:
            await container.indexing.workers.start()
            stack.push_async_callback(container.indexing.workers.stop)
        access = McpAccess(
            Services(container.notes, container.search, container.chat),
            key_user(container.users, key),
            allow_writes=allow_writes,
        )
        server = build_server(access)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
