"""Values the indexing code passes around: a run's settings, stats and outcome, the work a
handed-over run carried, and what a maintenance pass did."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from bson import ObjectId


@dataclass(frozen=True, slots=True)
class ReconcilerConfig:
    lease_s: float = 120.0
    max_attempts: int = 5
    backoff_base_s: float = 2.0
    backoff_max_s: float = 600.0
    turn_s: float = 10.0  # a run embedding longer hands over to another user's note
    # How long a replaced version's chunks stay searchable after a commit: a search index
    # that applies writes late (Atlas) still finds the note meanwhile. 0: evicted at once.
    retain_s: float = 0.0
    # A new generation (chunker or model) is built beside the old one, which its readers
    # keep until their switch (the local search backend). False (Atlas): a note's chunks of
    # the old generation are replaced as the note is re-indexed.
    blue_green: bool = True


@dataclass(frozen=True, slots=True)
class IndexStats:
    """What one run did, stored on the note as `last_index_stats` (`as_document`)."""

    chunks: int
    embedded: int
    reused: int
    tokens_embedded: int
    duration_ms: float

    def as_document(self) -> dict[str, Any]:
        """The stored and logged form (these keys, in this order)."""
        return asdict(self)


def _number(value: Any) -> float:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else 0


@dataclass(frozen=True, slots=True)
class Progress:
    """The work of a run that handed its note over before completing it, kept on the note
    as `index_progress` (`as_document`) until a run completes the note."""

    embedded: int = 0
    tokens: int = 0
    ms: float = 0.0

    def as_document(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_document(cls, stored: Any) -> Progress:
        """The note's `index_progress` as stored; anything that is not a number counts 0."""
        carried = stored if isinstance(stored, dict) else {}
        return cls(
            embedded=int(_number(carried.get("embedded"))),
            tokens=int(_number(carried.get("tokens"))),
            ms=_number(carried.get("ms")),
        )


@dataclass(frozen=True, slots=True)
class IndexOutcome:
    """What one run did to one note."""

    note_id: ObjectId
    status: str  # indexed | pending | failed | lost_lease | handed_over
    stats: IndexStats | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class MaintenanceReport:
    """What one maintenance pass did (`IndexWorkers.maintenance_once`)."""

    exhausted: int  # notes failed: their workers kept dying
    stranded: int  # pending notes given their attempts back
    pending: int  # queue depth: pending or indexing
    failed: int  # queue depth: failed
    evicted: int  # chunks of older versions deleted
    leftovers: int  # uncommitted chunks of failed notes deleted
    orphans: int  # chunks of missing notes deleted
    switched: int = 0  # users whose search moved to the configured generation
