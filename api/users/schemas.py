"""User and API-key schemas."""

from __future__ import annotations

import re
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.schemas import TEXT_PATTERN, utf8_clean

USER_NAME_MAX = 100
_NAME = re.compile(TEXT_PATTERN)


def clean_user_name(value: str) -> str:
    """A user's display name as stored: trimmed, one line with a visible character, no
    control characters (the rule of note titles), at most USER_NAME_MAX characters.
    ValueError otherwise. The API's schema and `autonote users create` both apply it."""
    value = utf8_clean(value, "name").strip()
    if not value or not _NAME.match(value):
        raise ValueError("name must be one line with a visible character, no control characters")
    if len(value) > USER_NAME_MAX:
        raise ValueError(f"name must be at most {USER_NAME_MAX} characters")
    return value


class UserCreate(BaseModel):
    """Body of `POST /v1/admin/users`. The name is trimmed."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"name": "alice"}]})
    name: str = Field(min_length=1, max_length=USER_NAME_MAX, pattern=TEXT_PATTERN)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return clean_user_name(v)


class ApiKeyOut(BaseModel):
    """A freshly issued API key. The secret is shown once and stored only as a hash."""

    user_id: str
    key_id: str
    api_key: str = Field(description="Bearer token; shown only in this response")
    created_at: datetime


class UserCreated(ApiKeyOut):
    """A new user and its first API key."""

    name: str


class Me(BaseModel):
    """The user an API key belongs to."""

    user_id: str
    name: str
    key_id: str | None
