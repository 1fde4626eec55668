"""Domain errors. Each carries its HTTP status and a stable machine-readable code; one handler
(`api.app`) renders every error as `{"error": code, "detail": ...}`. Services raise these and
never import FastAPI."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """Base class: `status` is the HTTP status, `code` the stable error identifier."""

    status: int = 400
    code: str = "bad_request"

    def __init__(self, detail: Any = None, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail if isinstance(detail, str) else self.code)
        self.detail = detail if detail is not None else self.code.replace("_", " ")
        self.headers = headers or {}


class BadRequest(DomainError):
    status, code = 400, "bad_request"


class Unauthorized(DomainError):
    status, code = 401, "unauthorized"

    def __init__(self, detail: Any = None) -> None:
        super().__init__(detail, headers={"WWW-Authenticate": "Bearer"})


class Forbidden(DomainError):
    status, code = 403, "forbidden"


class NotFound(DomainError):
    """Also what another user's resource looks like: never confirm that it exists."""

    status, code = 404, "not_found"


class Conflict(DomainError):
    status, code = 409, "conflict"


class PreconditionFailed(DomainError):
    status, code = 412, "precondition_failed"


class PayloadTooLarge(DomainError):
    status, code = 413, "payload_too_large"


class UnsupportedMediaType(DomainError):
    status, code = 415, "unsupported_media_type"


class ValidationFailed(DomainError):
    status, code = 422, "validation_error"


class RateLimited(DomainError):
    status, code = 429, "rate_limited"

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(
            f"too many requests; retry after {retry_after_s}s",
            headers={"Retry-After": str(retry_after_s)},
        )


class ServiceUnavailable(DomainError):
    status, code = 503, "service_unavailable"

    def __init__(self, detail: Any = None, *, retry_after_s: int = 1) -> None:
        super().__init__(detail, headers={"Retry-After": str(retry_after_s)})


class DatabaseUnavailable(ServiceUnavailable):
    code = "database_unavailable"


class StartupError(Exception):
    """The configuration cannot work on this deployment; the message says what to change.
    Start-up stops with that one line."""
