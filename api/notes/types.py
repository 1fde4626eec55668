"""Value types of the notes domain shared by its callers (the import service among them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

# What an upsert did: made a new note, changed one, or found it as asked.
UpsertOutcome = Literal["created", "updated", "unchanged"]


@dataclass(frozen=True, slots=True)
class NoteTimes:
    """Times a client knows better than the clock (front matter `created`/`updated`):
    `created_at` applies when the note is created or changed, `updated_at` when it is
    changed (else the write's own time). Aware UTC datetimes at millisecond precision."""

    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Upserted:
    """The note after an upsert and what the upsert did."""

    doc: dict[str, Any]
    outcome: UpsertOutcome


def key_folder(external_id: str) -> str:
    """The folder part of a key: what precedes its last "/" ("" for a key without one)."""
    return external_id.rpartition("/")[0]
