"""OpenAI (and OpenAI-compatible) embeddings with batching, bounded concurrency and retries.

Retries use `tenacity` around single SDK calls made with `max_retries=0`, not the SDK's own
retry loop: the SDK retries invisibly (no hook per attempt), so we could neither log each
retry (`embedding.retry` with attempt, status and delay) nor count the HTTP calls we pay for.
The wait honours the server's `retry-after-ms` / `Retry-After` and otherwise backs off
exponentially with jitter.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import openai
import structlog
from openai import AsyncOpenAI
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from api.tokenizer.encoders import tiktoken_tokenizer
from connectors.embeddings.base import EmbeddingBatch, EmbeddingError

log = structlog.get_logger(__name__)

MAX_INPUT_TOKENS = 8191
RETRYABLE_STATUSES = frozenset({408, 409, 429})  # plus every 5xx
MAX_RETRY_AFTER_S = 60.0


class OpenAIEmbeddingError(EmbeddingError):
    """An embedding request failed; `status` is the last HTTP status (None: no response)."""

    def __init__(
        self, message: str, *, retryable: bool, status: int | None = None, attempts: int = 0
    ) -> None:
        super().__init__(message, retryable=retryable)
        self.status = status
        self.attempts = attempts


def _status(exc: BaseException | None) -> int | None:
    return exc.status_code if isinstance(exc, openai.APIStatusError) else None


def is_retryable(exc: BaseException) -> bool:
    """Timeouts, connection errors, 408/409/429 and 5xx — except a 429 that means the
    account is out of quota, which no amount of waiting fixes."""
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code == 429 and exc.code == "insufficient_quota":
            return False
        return exc.status_code in RETRYABLE_STATUSES or exc.status_code >= 500
    return False


def retry_after_seconds(exc: BaseException | None) -> float | None:
    """The server's requested wait (`retry-after-ms`, then `Retry-After` as seconds or an
    HTTP date), or None when it gave none."""
    if not isinstance(exc, openai.APIStatusError):
        return None
    headers = exc.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            if name != "retry-after":
                continue
            try:
                seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
            except (TypeError, ValueError):
                continue
        if seconds == seconds:  # not NaN
            return max(seconds, 0.0)  # a date in the past means now
    return None


def plan_batches(counts: Sequence[int], max_inputs: int, max_tokens: int) -> list[range]:
    """Consecutive index ranges with at most `max_inputs` inputs and `max_tokens` tokens
    each (an input alone above `max_tokens` gets a batch of its own)."""
    batches: list[range] = []
    start, tokens = 0, 0
    for i, n in enumerate(counts):
        if i > start and (i - start >= max_inputs or tokens + n > max_tokens):
            batches.append(range(start, i))
            start, tokens = i, 0
        tokens += n
    if start < len(counts):
        batches.append(range(start, len(counts)))
    return batches


def decode_vectors(data: Sequence[Any], n: int, dimensions: int) -> np.ndarray:
    """Rows of an embeddings response (base64 or float lists) as L2-normalised float32
    (n, dimensions), placed by their `index`."""
    out = np.empty((n, dimensions), dtype=np.float32)
    seen = np.zeros(n, dtype=bool)
    for item in data:
        raw = item.embedding
        vec = (
            np.frombuffer(base64.b64decode(raw), dtype="<f4")
            if isinstance(raw, str)
            else np.asarray(raw, dtype=np.float32)
        )
        if vec.shape != (dimensions,):
            raise OpenAIEmbeddingError(
                f"model returned {vec.shape[0]}-dimensional vectors; configured {dimensions}",
                retryable=False,
            )
        if not 0 <= item.index < n or seen[item.index]:
            raise OpenAIEmbeddingError(f"bad embedding index {item.index}", retryable=False)
        out[item.index] = vec
        seen[item.index] = True
    if not seen.all():
        raise OpenAIEmbeddingError(
            f"response has {int(seen.sum())} of {n} vectors", retryable=False
        )
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.clip(norms, 1e-12, None)


@dataclass
class _Calls:
    requests: int = 0


class OpenAIEmbedder:
    """`Embedder` for OpenAI's embeddings API (or any server speaking it).

    The `AsyncOpenAI` client is created and closed by the application (lifespan) and
    injected here; its own retries are bypassed (see module docstring).
    """

    provider = "openai"
    max_input_tokens = MAX_INPUT_TOKENS

    def __init__(
        self,
        client: AsyncOpenAI,
        model: str = "text-embedding-3-small",
        dimensions: int = 1536,
        *,
        max_batch_inputs: int = 2048,
        max_batch_tokens: int = 250_000,
        max_concurrency: int = 4,
        max_attempts: int = 5,
        timeout_s: float = 60.0,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 20.0,
        encoding_format: Literal["base64", "float"] = "base64",
    ) -> None:
        """Configure batching (count and token limits per request), concurrency and retry
        policy. `dimensions` is sent only to text-embedding-3* models (others reject it)."""
        if min(max_batch_inputs, max_batch_tokens, max_concurrency, max_attempts) < 1:
            raise ValueError("batch limits, max_concurrency and max_attempts must be >= 1")
        self.model = model
        self.dimensions = dimensions
        self.tokenizer = tiktoken_tokenizer("cl100k_base")
        self._client = client.with_options(max_retries=0, timeout=timeout_s)
        self._max_inputs = max_batch_inputs
        self._max_tokens = max_batch_tokens
        self._max_attempts = max_attempts
        self._backoff = wait_exponential_jitter(
            multiplier=backoff_initial_s, max=backoff_max_s, jitter=backoff_initial_s
        )
        self._encoding_format = encoding_format
        self._send_dimensions = model.startswith("text-embedding-3")
        # Shared by all concurrent embed() calls: the bound is per embedder, not per call.
        self._semaphore = asyncio.Semaphore(max_concurrency)

    async def embed(self, texts: list[str], *, truncate: bool = False) -> EmbeddingBatch:
        """Embed `texts` in input order. Inputs over 8191 tokens raise a non-retryable
        `EmbeddingError` unless `truncate=True`; exhausted retries raise a retryable one."""
        if not texts:
            return EmbeddingBatch(np.empty((0, self.dimensions), np.float32), 0, requests=0)
        texts, counts = self._checked(texts, truncate)
        batches = plan_batches(counts, self._max_inputs, self._max_tokens)
        calls = _Calls()
        started = time.perf_counter()
        tasks = [
            asyncio.create_task(self._embed_batch([texts[i] for i in b], calls)) for b in batches
        ]
        try:
            results = await asyncio.gather(*tasks)
        except BaseException:
            # One batch gave up: don't keep paying for the others.
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        vectors = np.concatenate([v for v, _ in results])
        tokens = sum(t for _, t in results)
        log.info(
            "embedding.batch_embedded",
            provider="openai",
            model=self.model,
            inputs=len(texts),
            batches=len(batches),
            requests=calls.requests,
            tokens=tokens,
            duration_ms=round((time.perf_counter() - started) * 1000, 1),
        )
        return EmbeddingBatch(vectors=vectors, tokens=tokens, requests=calls.requests)

    def _checked(self, texts: list[str], truncate: bool) -> tuple[list[str], list[int]]:
        counts = self.tokenizer.count_batch(texts)
        out = list(texts)
        for i, n in enumerate(counts):
            if out[i] == "":
                raise OpenAIEmbeddingError(
                    f"input {i} is empty; the API rejects empty strings", retryable=False
                )
            if n > MAX_INPUT_TOKENS:
                if not truncate:
                    raise OpenAIEmbeddingError(
                        f"input {i} has {n} tokens; {self.model} takes at most "
                        f"{MAX_INPUT_TOKENS} (chunk smaller or pass truncate=True)",
                        retryable=False,
                    )
                out[i] = self.tokenizer.split_at_tokens(out[i], MAX_INPUT_TOKENS)[0]
                counts[i] = self.tokenizer.count(out[i])
        return out, counts

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        server_wait = retry_after_seconds(exc)
        if server_wait is not None:
            return min(server_wait, MAX_RETRY_AFTER_S)
        return float(self._backoff(state))

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log.warning(
            "embedding.retry",
            provider="openai",
            model=self.model,
            attempt=state.attempt_number,
            status=_status(exc),
            error=type(exc).__name__ if exc else None,
            delay=round(state.next_action.sleep, 3) if state.next_action else None,
        )

    async def _embed_batch(self, batch: list[str], calls: _Calls) -> tuple[np.ndarray, int]:
        extra: dict[str, Any] = {"dimensions": self.dimensions} if self._send_dimensions else {}
        attempts = 0
        async with self._semaphore:
            try:
                async for attempt in AsyncRetrying(
                    stop=stop_after_attempt(self._max_attempts),
                    wait=self._wait,
                    retry=retry_if_exception(is_retryable),
                    before_sleep=self._log_retry,
                    reraise=True,
                ):
                    with attempt:
                        attempts += 1
                        calls.requests += 1
                        resp = await self._client.embeddings.create(
                            model=self.model,
                            input=batch,
                            encoding_format=self._encoding_format,
                            **extra,
                        )
            except openai.APIError as exc:
                retryable = is_retryable(exc)
                status = _status(exc)
                log.error(
                    "embedding.failed",
                    provider="openai",
                    model=self.model,
                    attempts=attempts,
                    status=status,
                    retryable=retryable,
                    error=type(exc).__name__,
                )
                raise OpenAIEmbeddingError(
                    f"OpenAI embeddings failed after {attempts} attempt(s)"
                    f" (last status {status or type(exc).__name__}): {exc}",
                    retryable=retryable,
                    status=status,
                    attempts=attempts,
                ) from exc
        vectors = decode_vectors(resp.data, len(batch), self.dimensions)
        return vectors, resp.usage.prompt_tokens if resp.usage else 0

    async def aclose(self) -> None:
        """Nothing to release: the injected client belongs to the application."""
