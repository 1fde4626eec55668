"""The authenticated caller, as services see it."""

from __future__ import annotations

from dataclasses import dataclass

from bson import ObjectId


@dataclass(frozen=True, slots=True)
class User:
    """The authenticated caller; `key_id` identifies which of its keys was used."""

    id: ObjectId
    name: str
    key_id: ObjectId | None = None
