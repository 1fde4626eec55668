"""One place that turns every failure into `{"error": ..., "detail": ...}` with the right
status: domain errors, validation errors, HTTP errors, database outages, and bugs (500,
without a stack trace in the body)."""

from __future__ import annotations

from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pymongo.errors import PyMongoError
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.db.client import is_unavailable
from api.errors import DatabaseUnavailable, DomainError

log = structlog.get_logger(__name__)

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    412: "precondition_failed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
    503: "service_unavailable",
}


def _json(
    status: int, code: str, detail: Any, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": code, "detail": detail}, status_code=status, headers=headers)


async def domain_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DomainError)
    return _json(exc.status, exc.code, exc.detail, exc.headers)


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": e.get("type", "")}
        for e in exc.errors()
    ]
    if any(e["type"] == "json_invalid" for e in errors):
        return _json(400, "invalid_json", "request body is not valid JSON (UTF-8)")
    # FastAPI parses no JSON from a body declared as another media type (or as none): it
    # passes the raw bytes on and reports the JSON object as missing, while the real
    # problem is the Content-Type. (A JSON body arrives parsed; an empty one as nothing.)
    raw = getattr(exc, "body", None)
    if isinstance(raw, bytes | bytearray) and raw and any(e["loc"] == ["body"] for e in errors):
        content_type = request.headers.get("content-type")
        shown = repr(content_type[:100]) if content_type else "no Content-Type"
        detail = f"send the body as application/json, not {shown}"
        return _json(415, "unsupported_media_type", detail)
    return _json(422, "validation_error", errors)


async def http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
        # FastAPI's answer to an undecodable body (e.g. not UTF-8): invalid JSON all the same.
        return _json(400, "invalid_json", "request body is not valid JSON (UTF-8)")
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    return _json(exc.status_code, code, exc.detail, getattr(exc, "headers", None))


def database_unavailable(exc: Exception, path: str) -> DatabaseUnavailable | None:
    """The 503 for a database error that means "unavailable" (logged), else None."""
    if not is_unavailable(exc):
        return None
    log.warning("db.unavailable", error=type(exc).__name__, path=path)
    return DatabaseUnavailable("the database is unavailable; retry shortly")


async def database_error(request: Request, exc: Exception) -> JSONResponse:
    unavailable = database_unavailable(exc, request.url.path)
    if unavailable is None:
        raise exc  # a real query error is a bug: RequestContextMiddleware answers 500
    return await domain_error(request, unavailable)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers; `DomainError` subclasses carry their own status and code."""
    app.add_exception_handler(DomainError, domain_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(PyMongoError, database_error)
