"""Builds the indexing machinery (reconciler + workers) from settings; shared by the API
lifespan, `autonote worker` and the migration, so all run the same code path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from api.config import Settings
from api.indexing.commit import CommitScope, IndexListener
from api.indexing.generation import Generation
from api.indexing.reconciler import Reconciler
from api.indexing.switch import GenerationSwitch
from api.indexing.switch_estimate import Pricing
from api.indexing.types import ReconcilerConfig
from api.indexing.worker import IndexWorkers
from api.providers import NOMINAL_TOKENS_PER_S, embedding_model_key, price_per_million


def retention_for(settings: Settings, backend: str) -> float:
    """How long replaced chunks stay searchable: Atlas indexes writes asynchronously
    (ATLAS_INDEX_LAG_S); the local index applies each commit at once."""
    return settings.atlas_index_lag_s if backend == "atlas" else 0.0


def blue_green_for(settings: Settings, backend: str) -> bool:
    """Whether a new chunker or model is built beside the serving index: on the local
    search backend, unless AUTONOTE_BLUE_GREEN=false (Atlas keeps one vector index)."""
    return settings.autonote_blue_green and backend == "local"


def build_switch(
    settings: Settings, db: AsyncDatabase, *, chunker: Any, embedder: Any
) -> GenerationSwitch:
    """The generation switch for this chunker and model (its price from the provider)."""
    provider = settings.resolved_embedding_provider
    pricing = Pricing(
        price_per_million(provider, embedder.model), NOMINAL_TOKENS_PER_S.get(provider, 0.0)
    )
    target = Generation(chunker.version, embedding_model_key(embedder))
    return GenerationSwitch(db, target, pricing=pricing)


@dataclass
class Indexing:
    reconciler: Reconciler
    workers: IndexWorkers

    @property
    def switch(self) -> GenerationSwitch:
        assert self.reconciler.switch is not None
        return self.reconciler.switch


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
    switch: GenerationSwitch | None = None,
    blue_green: bool = True,
) -> Indexing:
    """A reconciler and `concurrency` worker loops (not started). `retain_s`: how long a
    replaced version stays searchable (`retention_for` gives it per search backend);
    `switch`: the generation switch (one is built unless given); `blue_green`: a new
    chunker or model is built beside the old index (the local search backend)."""
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
            blue_green=blue_green,
        ),
        listeners=listeners,
        commit_scope=commit_scope,
        switch=switch or build_switch(settings, db, chunker=chunker, embedder=embedder),
    )
    workers = IndexWorkers(
        reconciler,
        concurrency=concurrency,
        poll_s=settings.autonote_index_poll_s,
        stop_grace_s=settings.autonote_index_stop_grace_s,
    )
    return Indexing(reconciler=reconciler, workers=workers)
