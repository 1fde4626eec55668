"""Builds the indexing machinery (reconciler + workers) from settings; shared by the API
lifespan, `autonote worker` and the migration, so all run the same code path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from api.config import Settings
from api.indexing.commit import CommitScope, IndexListener
from api.indexing.reconciler import Reconciler
from api.indexing.types import ReconcilerConfig
from api.indexing.worker import IndexWorkers
from api.providers import embedding_model_key


def retention_for(settings: Settings, backend: str) -> float:
    """How long replaced chunks stay searchable: Atlas indexes writes asynchronously
    (ATLAS_INDEX_LAG_S); the local index applies each commit at once."""
    return settings.atlas_index_lag_s if backend == "atlas" else 0.0


@dataclass
class Indexing:
    reconciler: Reconciler
    workers: IndexWorkers


def build_indexing(
    settings: Settings,
    db: AsyncDatabase,
    *,
    chunker: Any,
    embedder: Any,
    concurrency: int,
    listeners: list[IndexListener] | None = None,
    commit_scope: CommitScope | None = None,
    retain_s: float = 0.0,
) -> Indexing:
    """A reconciler and `concurrency` worker loops (not started). `retain_s`: how long a
    replaced version stays searchable (`retention_for` gives it per search backend)."""
    reconciler = Reconciler(
        db,
        chunker=chunker,
        embedder=embedder,
        model_key=embedding_model_key(embedder),
        config=ReconcilerConfig(
            lease_s=settings.autonote_index_lease_s,
            max_attempts=settings.autonote_index_max_attempts,
            backoff_base_s=settings.autonote_index_backoff_base_s,
            backoff_max_s=settings.autonote_index_backoff_max_s,
            turn_s=settings.autonote_index_turn_s,
            retain_s=retain_s,
        ),
        listeners=listeners,
        commit_scope=commit_scope,
    )
    workers = IndexWorkers(
        reconciler,
        concurrency=concurrency,
        poll_s=settings.autonote_index_poll_s,
        stop_grace_s=settings.autonote_index_stop_grace_s,
    )
    return Indexing(reconciler=reconciler, workers=workers)
