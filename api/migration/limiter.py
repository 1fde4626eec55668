"""An embedder wrapper that keeps a migration under the provider's rate limits.

Backfilling a large database is the one time Autonote sends embedding traffic as fast as it
can; a provider account has tokens-per-minute and requests-per-minute limits shared with
the live API. `RateLimitedEmbedder` puts `aiolimiter` leaky buckets in front of `embed()`:
tokens are counted exactly with the model's tokenizer before the call, and a call larger
than one minute's token budget is split so it never waits for capacity it can never have.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import structlog
from aiolimiter import AsyncLimiter

from connectors.embeddings.base import EmbeddingBatch

log = structlog.get_logger(__name__)


def split_by_budget(counts: list[int], budget: int) -> list[range]:
    """Consecutive index ranges whose token sums stay within `budget` (an input alone above
    the budget gets a range of its own)."""
    groups: list[range] = []
    start, total = 0, 0
    for i, n in enumerate(counts):
        if i > start and total + n > budget:
            groups.append(range(start, i))
            start, total = i, 0
        total += n
    if start < len(counts):
        groups.append(range(start, len(counts)))
    return groups


class RateLimitedEmbedder:
    """`Embedder` that waits for token/request budget before delegating to `inner`.

    Everything else (`model`, `dimensions`, `tokenizer`, ...) is the inner embedder's, so the
    chunker and the stored `embedding_model` are exactly what they would be without it.
    """

    def __init__(
        self,
        inner: Any,
        *,
        tokens_per_period: int | None,
        requests_per_period: int | None,
        period_s: float = 60.0,
    ) -> None:
        """Limits are per `period_s` (a minute for provider limits); None disables one."""
        if tokens_per_period is not None and tokens_per_period < 1:
            raise ValueError("tokens_per_period must be >= 1")
        if requests_per_period is not None and requests_per_period < 1:
            raise ValueError("requests_per_period must be >= 1")
        self.inner = inner
        self.provider = inner.provider
        self.model = inner.model
        self.dimensions = inner.dimensions
        self.max_input_tokens = inner.max_input_tokens
        self.tokenizer = inner.tokenizer
        self._token_budget = tokens_per_period
        self._tokens = AsyncLimiter(tokens_per_period, period_s) if tokens_per_period else None
        self._requests = (
            AsyncLimiter(requests_per_period, period_s) if requests_per_period else None
        )

    async def embed(self, texts: list[str], **kwargs: Any) -> EmbeddingBatch:
        """Embed `texts` through the inner embedder, within the configured budgets."""
        if not texts:
            return await self.inner.embed(texts, **kwargs)
        counts = self.tokenizer.count_batch(texts)
        groups = (
            split_by_budget(counts, self._token_budget)
            if self._token_budget
            else [range(len(texts))]
        )
        parts: list[EmbeddingBatch] = []
        for group in groups:
            tokens = sum(counts[i] for i in group)
            if self._tokens is not None:
                # One input above the whole budget can only wait for a full bucket.
                await self._tokens.acquire(min(tokens, self._tokens.max_rate))
            if self._requests is not None:
                await self._requests.acquire(1)
            batch = await self.inner.embed([texts[i] for i in group], **kwargs)
            if self._requests is not None and batch.requests > 1:
                # The provider split our call: charge the extra requests afterwards so the
                # average rate holds (the next call waits for them).
                await self._requests.acquire(min(batch.requests - 1, self._requests.max_rate))
            parts.append(batch)
        if len(parts) == 1:
            return parts[0]
        log.debug("embedding.rate_limited_split", groups=len(parts), inputs=len(texts))
        return EmbeddingBatch(
            vectors=np.concatenate([p.vectors for p in parts]),
            tokens=sum(p.tokens for p in parts),
            requests=sum(p.requests for p in parts),
        )

    async def aclose(self) -> None:
        """Close the inner embedder."""
        await self.inner.aclose()
