"""Pure parts of the migration: cost, reuse accounting, run statistics, exit codes, rate
and ETA, the rate-limited embedder (against a fake provider: the external boundary)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import pytest
from bson import ObjectId

from api.migration.estimate import Estimate, cost_usd, price_per_million
from api.migration.limiter import RateLimitedEmbedder, split_by_budget
from api.migration.progress import rate_and_eta
from api.migration.types import MigrationStats, MigrationSummary, NoteResult
from connectors.embeddings.base import EmbeddingBatch


def test_prices() -> None:
    assert price_per_million("openai", "text-embedding-3-small") == 0.02
    assert price_per_million("openai", "text-embedding-3-large") == 0.13
    assert price_per_million("openai", "text-embedding-ada-002") == 0.10
    assert price_per_million("local", "anything") == 0.0
    assert price_per_million("openai", "unknown-model") is None
    assert cost_usd(2_500_000, 0.02) == pytest.approx(0.05)
    assert cost_usd(10, None) is None


def test_estimate_counts_reuse_like_the_reconciler() -> None:
    alice, bob = ObjectId(), ObjectId()
    est = Estimate(model="text-embedding-3-small", price_per_million=0.02)
    seen: set[Any] = set()
    known = {(alice, "h-stored")}
    cached = {(alice, "h-cached")}
    # Alice: one stored, one cached, one new, and the new one repeated in the same note.
    est.add_note(
        alice,
        [("h-stored", 10), ("h-cached", 20), ("h-new", 30), ("h-new", 30)],
        known=known,
        cached=cached,
        seen=seen,
    )
    # Bob reuses neither Alice's stored chunk nor her cached vector: never across authors.
    est.add_note(bob, [("h-stored", 10), ("h-cached", 20)], known=known, cached=cached, seen=seen)
    assert (est.notes, est.chunks, est.tokens) == (2, 6, 120)
    assert (est.reusable_chunks, est.reusable_tokens) == (3, 60)
    assert est.tokens_to_embed == 60
    assert est.cost_usd == pytest.approx(60 * 0.02 / 1e6)
    out = est.as_dict()
    assert out["estimated_cost_usd"] == est.cost_usd and out["reasons"] == {}


def test_stats_and_exit_codes() -> None:
    stats = MigrationStats(selected=4)
    oid = ObjectId()
    stats.record(NoteResult(oid, "indexed", chunks=3, embedded=2, reused=1, tokens_embedded=50))
    stats.record(NoteResult(oid, "indexed", chunks=1, by_other=True))
    stats.record(NoteResult(oid, "skipped", detail="trashed"))
    assert MigrationSummary(stats, 1.0).exit_code == 0
    stats.record(NoteResult(oid, "indexed", chunks=2, embedded=2, tokens_embedded=9), catch_up=True)
    assert (stats.done, stats.indexed, stats.skipped, stats.reindexed_after_edit) == (3, 2, 1, 1)
    assert (stats.chunks, stats.embedded, stats.tokens_embedded) == (4, 4, 59)
    assert stats.indexed_by_others == 1 and stats.skip_reasons == {"trashed": 1}
    stats.record(NoteResult(oid, "failed", detail="EmbeddingError: 500"))
    summary = MigrationSummary(stats, 2.0)
    assert summary.exit_code == 1
    assert summary.as_dict()["failures"] == [{"note_id": str(oid), "error": "EmbeddingError: 500"}]
    assert MigrationSummary(stats, 2.0, interrupted=True).exit_code == 130
    assert MigrationSummary(MigrationStats(), 0.1, error="AutoReconnect").exit_code == 1


def test_a_failure_after_an_edit_is_counted_apart_and_still_fails_the_run() -> None:
    """A note indexed by the first pass and failing in the catch-up pass was counted in
    both `indexed` and `failed`: indexed + failed + skipped came to more than `done`."""
    stats = MigrationStats(selected=2)
    a, b = ObjectId(), ObjectId()
    stats.record(NoteResult(a, "indexed", chunks=1))
    stats.record(NoteResult(b, "indexed", chunks=1))
    stats.record(NoteResult(a, "failed", detail="EmbeddingError: 500"), catch_up=True)
    assert stats.indexed + stats.failed + stats.skipped == stats.done == 2
    assert (stats.failed, stats.failed_after_edit) == (0, 1)
    summary = MigrationSummary(stats, 1.0)
    assert summary.exit_code == 1
    out = summary.as_dict()
    assert out["failed_after_edit"] == 1 and out["failures"][0]["note_id"] == str(a)


def test_rate_and_eta() -> None:
    assert rate_and_eta(0, 100, 5.0) == (0.0, None)
    assert rate_and_eta(50, 100, 10.0) == (5.0, 10.0)
    assert rate_and_eta(100, 100, 10.0) == (10.0, 0.0)
    assert rate_and_eta(3, 10, 0.0) == (0.0, None)


def test_split_by_budget() -> None:
    assert split_by_budget([40, 40, 40, 40, 40], 100) == [range(0, 2), range(2, 4), range(4, 5)]
    assert split_by_budget([500, 10, 10], 100) == [range(0, 1), range(1, 3)]
    assert split_by_budget([], 100) == []


class WordTokenizer:
    name = "words"

    def count(self, text: str) -> int:
        return len(text.split())

    def count_batch(self, texts: list[str]) -> list[int]:
        return [self.count(t) for t in texts]


class FakeProvider:
    """Stands in for the embedding provider: records calls and when they happened."""

    provider, model, dimensions, max_input_tokens = "openai", "fake", 4, 8191

    def __init__(self, requests_per_call: int = 1) -> None:
        self.tokenizer = WordTokenizer()
        self.calls: list[tuple[float, list[str]]] = []
        self.requests_per_call = requests_per_call
        self.closed = False

    async def embed(self, texts: list[str]) -> EmbeddingBatch:
        self.calls.append((time.monotonic(), list(texts)))
        vectors = np.array([[len(t), 0, 0, 1] for t in texts], dtype=np.float32)
        return EmbeddingBatch(
            vectors, tokens=sum(self.tokenizer.count_batch(texts)), requests=self.requests_per_call
        )

    async def aclose(self) -> None:
        self.closed = True


async def test_token_budget_splits_and_paces_calls() -> None:
    inner = FakeProvider()
    limited = RateLimitedEmbedder(
        inner, tokens_per_period=100, requests_per_period=None, period_s=1.0
    )
    assert (limited.model, limited.dimensions, limited.tokenizer) == ("fake", 4, inner.tokenizer)
    texts = [" ".join(["w"] * 40) + f" {i}" for i in range(5)]  # 41 tokens each
    started = time.monotonic()
    batch = await limited.embed(texts)
    elapsed = time.monotonic() - started
    assert [len(t) for _, t in inner.calls] == [2, 2, 1]
    assert batch.tokens == 205 and batch.requests == 3
    assert [row[0] for row in batch.vectors] == [len(t) for t in texts], "input order kept"
    # A bucket of 100 drains at 100 tokens/s: 82 + 82 + 41 tokens need about 1 s of waiting.
    assert elapsed >= 0.8
    await limited.aclose()
    assert inner.closed


async def test_request_budget_counts_provider_splits() -> None:
    inner = FakeProvider(requests_per_call=2)
    limited = RateLimitedEmbedder(
        inner, tokens_per_period=None, requests_per_period=4, period_s=1.0
    )
    started = time.monotonic()
    for i in range(3):
        await limited.embed([f"text {i}"])
    # 3 calls x 2 requests = 6 requests at 4 per second: the last call waits ~0.5 s.
    assert time.monotonic() - started >= 0.4
    assert len(inner.calls) == 3


async def test_one_input_above_the_budget_still_goes_through() -> None:
    inner = FakeProvider()
    limited = RateLimitedEmbedder(
        inner, tokens_per_period=10, requests_per_period=None, period_s=0.2
    )
    batch = await asyncio.wait_for(limited.embed([" ".join(["w"] * 50)]), timeout=5)
    assert batch.tokens == 50 and len(inner.calls) == 1
    with pytest.raises(ValueError):
        RateLimitedEmbedder(inner, tokens_per_period=0, requests_per_period=None)
