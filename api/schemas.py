"""Schemas shared by every route: the error body and the documented error responses."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ErrorBody(BaseModel):
    """Every error response: a stable machine-readable code and a human-readable detail."""

    error: str = Field(examples=["not_found"])
    detail: Any = Field(examples=["note not found"])


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for the given error statuses."""
    described = {
        400: "Malformed request (invalid id, JSON, cursor or header)",
        401: "Missing, malformed, unknown or revoked API key",
        403: "Forbidden (admin API disabled)",
        404: "Not found (another user's note is reported as not found)",
        412: "If-Match version does not match",
        413: "Body or note content over the configured limit",
        422: "Validation error",
        429: "Rate limited; see Retry-After",
        503: "Database unavailable; retry after Retry-After",
    }
    return {s: {"model": ErrorBody, "description": described[s]} for s in statuses}


AUTHED = (400, 401, 413, 422, 429, 503)
ADMIN = (400, 401, 403, 413, 422, 503)
