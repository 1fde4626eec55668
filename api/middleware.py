"""ASGI middleware: request ids + access logs + spans, a request-body
limit that rejects oversized bodies before they are read whole, authentication of
`/v1` requests before anything reads their body, and the CORS options."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import structlog
from opentelemetry import trace
from pymongo.errors import PyMongoError
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.error_handlers import database_unavailable
from api.errors import DomainError, ValidationFailed
from api.observability import tracer

log = structlog.get_logger("api.http")

# Span and log labels take the method only from this set, as OpenTelemetry's HTTP
# conventions say: anything else is "_OTHER" (FastAPI labels its request-duration
# histogram the same way: tests/test_metrics.py).
_KNOWN_METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"}
)


def cors_options(origins: list[str]) -> dict[str, Any]:
    """Starlette `CORSMiddleware` options for AUTONOTE_CORS_ORIGINS. It sits outside the
    authentication, so a preflight is answered before any key is asked for, and errors
    (401, 413, 429) carry the headers a page needs to read them. Keys travel in the
    Authorization header, never in cookies: no credentials mode."""
    return {
        "allow_origins": origins,
        "allow_methods": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"],
        "allow_headers": ["Authorization", "Content-Type", "If-Match", "X-Request-ID"],
        "expose_headers": ["ETag", "Location", "Retry-After", "X-Request-ID"],
        "allow_credentials": False,
        "max_age": 600,
    }


class RequestContextMiddleware:
    """Binds `request_id` to every log line of the request, opens a server span, logs
    `http.request` with its duration. Echoes `X-Request-ID`. The request-latency histogram
    is FastAPI's own (`http.server.request.duration`, seconds)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        incoming = headers.get(b"x-request-id", b"").decode("latin-1")
        request_id = (
            incoming if 0 < len(incoming) <= 64 and incoming.isprintable() else uuid.uuid4().hex
        )
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=request_id)
        status = 500
        started = False
        start = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                status, started = message["status"], True
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", request_id.encode())]
            await send(message)

        method, path = scope["method"], scope["path"]
        if method not in _KNOWN_METHODS:
            method = "_OTHER"
        with tracer.start_as_current_span(
            f"HTTP {method}",
            kind=trace.SpanKind.SERVER,
            attributes={"http.request.method": method, "url.path": path, "request.id": request_id},
        ) as span:
            try:
                await self.app(scope, receive, send_wrapper)
            except Exception as exc:  # a bug: answer 500 without leaking a stack trace
                log.error("http.unhandled_error", path=path, error=type(exc).__name__, exc_info=exc)
                span.record_exception(exc)
                if not started:
                    detail = f"internal error (request id {request_id})"
                    for message in _error_response(500, "internal_error", detail):
                        await send_wrapper(message)
            finally:
                elapsed_ms = (time.perf_counter() - start) * 1000
                route = scope.get("route")
                route_path = getattr(route, "path", "unmatched")
                span.set_attribute("http.route", route_path)
                span.set_attribute("http.response.status_code", status)
                log.info(
                    "http.request",
                    method=method,
                    path=path,
                    route=route_path,
                    status=status,
                    duration_ms=round(elapsed_ms, 2),
                )
                structlog.contextvars.clear_contextvars()


class BodyTooLarge(StarletteHTTPException):
    """Raised from `receive` when a streamed body passes the limit. An HTTPException so
    FastAPI's body parsing re-raises it untouched and the error handler renders a 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body exceeds the limit of {limit} bytes")


def _error_response(
    status: int, code: str, detail: Any, headers: dict[str, str] | None = None
) -> list[Message]:
    body = json.dumps({"error": code, "detail": detail}).encode()
    extra = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    return [
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *extra,
            ],
        },
        {"type": "http.response.body", "body": body},
    ]


class BodyLimitMiddleware:
    """413 for bodies over the limit: at once from Content-Length, or as soon as a chunked
    body crosses it — never after buffering it all. `limits` maps path prefixes to bytes."""

    def __init__(
        self, app: ASGIApp, default_limit: int, limits: dict[str, int] | None = None
    ) -> None:
        self.app = app
        self.default_limit = default_limit
        self.limits = limits or {}

    def _limit_for(self, path: str) -> int:
        for prefix, limit in self.limits.items():
            if path.startswith(prefix):
                return limit
        return self.default_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self._limit_for(scope["path"])
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        detail = f"request body exceeds the limit of {limit} bytes"
        if declared is not None:
            try:
                too_big = int(declared) > limit
            except ValueError:
                too_big = False
            if too_big:
                for message in _error_response(413, "payload_too_large", detail):
                    await send(message)
                return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                for message in _error_response(413, "payload_too_large", detail):
                    await send(message)


class AuthenticateFirstMiddleware:
    """Resolve who sends a `/v1` request before anything reads its body.

    FastAPI parses a JSON body before any dependency runs: without this, an anonymous
    client could have the server parse megabytes of JSON on the event loop before its 401.
    The user's key (or, on `/v1/admin`, the admin token) is checked here with the same
    service calls as the `current_user` and `require_admin` dependencies, which then reuse
    the outcome from `scope["state"]`. When the database is unavailable the 503 is answered
    here too, so the dependency does not wait out a second timeout.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        container = getattr(scope["app"].state, "container", None) if path else None
        if container is None or not path.startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        authorization = Headers(scope=scope).get("authorization")
        state = scope.setdefault("state", {})
        try:
            if path.startswith("/v1/admin/"):
                client = scope.get("client")
                container.users.check_admin(authorization, client=client[0] if client else "")
                state["admin_checked"] = True
            else:
                state["user"] = await container.users.authenticate(authorization)
        except (DomainError, PyMongoError) as exc:
            error = exc if isinstance(exc, DomainError) else database_unavailable(exc, path)
            if error is None:
                raise  # a real query error is a bug: a 500
            for message in _error_response(error.status, error.code, error.detail, error.headers):
                await send(message)
            return
        await self.app(scope, receive, send)


def single_query_values(request: Request) -> None:
    """No route takes a query parameter twice: `?permanent=false&permanent=true` is a 422,
    not whichever value comes last (tests/notes/test_bad_input.py)."""
    seen: set[str] = set()
    for key, _ in request.query_params.multi_items():
        if key in seen:
            raise ValidationFailed(f"query parameter {key!r} given more than once")
        seen.add(key)
