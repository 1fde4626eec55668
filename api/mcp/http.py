"""`/mcp`: the MCP server over streamable HTTP, mounted on the API. Every HTTP request
is authenticated with its bearer API key before the SDK reads it (401 without a valid
key, 429 over the key's rate limit: the same checks and limits as `/v1`), and the tools
then act for that key's user. Stateless: no MCP session outlives its request, so any API
process can answer any request and no session can pass from one key to another."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import structlog
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from pymongo.errors import PyMongoError
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from api.db.client import is_unavailable
from api.errors import DatabaseUnavailable, DomainError, ServiceUnavailable, Unauthorized
from api.mcp.server import McpAccess, build_server
from api.mcp.tools import Services
from api.users.types import User

if TYPE_CHECKING:
    from api.container import Container

log = structlog.get_logger(__name__)


class MethodNotAllowed(DomainError):
    status, code = 405, "method_not_allowed"


NOT_POST = MethodNotAllowed(
    "send MCP messages with POST; this server keeps no sessions and opens no event stream",
    headers={"Allow": "POST"},
)


async def request_user(ctx: ServerRequestContext[Any, Any]) -> User:
    """The user `McpEndpoint` authenticated for the HTTP request carrying this message."""
    request = ctx.request
    user = request.scope.get("state", {}).get("user") if request is not None else None
    if not isinstance(user, User):
        raise Unauthorized("no authenticated user for this request")
    return user


class McpEndpoint:
    """The ASGI app behind `/mcp`; serves once `running` has started it."""

    def __init__(self, *, allow_writes: bool, max_body_bytes: int) -> None:
        self.allow_writes = allow_writes
        self.max_body_bytes = max_body_bytes
        self._manager: StreamableHTTPSessionManager | None = None
        self._container: Container | None = None

    @asynccontextmanager
    async def running(self, container: Container) -> AsyncIterator[None]:
        """Serve `/mcp` with the container's services until the context ends."""
        access = McpAccess(
            Services(container.notes, container.search, container.chat),
            request_user,
            allow_writes=self.allow_writes,
        )
        manager = StreamableHTTPSessionManager(
            build_server(access),
            stateless=True,
            json_response=True,
            max_request_body_size=self.max_body_bytes,
        )
        started, stop = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(_serve(manager, started, stop))
        await _started(task, started)
        self._manager, self._container = manager, container
        try:
            yield
        finally:
            self._manager = self._container = None
            stop.set()
            await task

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager, container = self._manager, self._container
        if manager is None or container is None:
            await _error(
                ServiceUnavailable("the MCP endpoint is starting or stopping"), scope, receive, send
            )
            return
        try:
            user = await container.users.authenticate(_authorization(scope))
        except DomainError as exc:
            await _error(exc, scope, receive, send)
            return
        except PyMongoError as exc:
            if not is_unavailable(exc):
                raise
            log.warning("db.unavailable", error=type(exc).__name__, path=scope.get("path"))
            await _error(
                DatabaseUnavailable("the database is unavailable; retry shortly"),
                scope,
                receive,
                send,
            )
            return
        if scope.get("method") != "POST":
            # Stateless: no stream for server-initiated messages, no session to delete.
            await _error(NOT_POST, scope, receive, send)
            return
        scope.setdefault("state", {})["user"] = user
        scope["state"]["user_id"] = str(user.id)
        await manager.handle_request(scope, receive, send)


async def _serve(
    manager: StreamableHTTPSessionManager, started: asyncio.Event, stop: asyncio.Event
) -> None:
    """Run the SDK's session manager in a task of its own: its task group must be left by
    the task that entered it, and an app's lifespan may start and end in different tasks
    (tests drive it so)."""
    async with manager.run():
        started.set()
        await stop.wait()


async def _started(task: asyncio.Task[None], started: asyncio.Event) -> None:
    """Wait until `task` has started the manager (or raise why it could not)."""
    waiting = asyncio.create_task(started.wait())
    await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
    if not started.is_set():
        waiting.cancel()
        await task  # raises what stopped it


def _authorization(scope: Scope) -> str | None:
    for name, value in scope.get("headers") or []:
        if name == b"authorization":
            return value.decode("latin-1")
    return None


async def _error(exc: DomainError, scope: Scope, receive: Receive, send: Send) -> None:
    """The `/v1` error body: `{"error": code, "detail": ...}` with its status and headers."""
    body = {"error": exc.code, "detail": exc.detail}
    await JSONResponse(body, status_code=exc.status, headers=exc.headers)(scope, receive, send)
