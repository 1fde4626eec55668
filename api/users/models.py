"""User and API-key schemas."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bson import ObjectId
from pydantic import BaseModel, ConfigDict, Field


@dataclass(frozen=True, slots=True)
class User:
    """The authenticated caller; `key_id` identifies which of its keys was used."""

    id: ObjectId
    name: str
    key_id: ObjectId | None = None


class UserCreate(BaseModel):
    """Body of `POST /v1/admin/users`."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"name": "alice"}]})
    name: str = Field(min_length=1, max_length=100, pattern=r"^[^\x00-\x1f]+$")


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
