"""OpenAIEmbedder with the real `openai` client against the local stub server."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest
from openai import AsyncOpenAI
from structlog.testing import capture_logs

from api.tokenizer.encoders import tiktoken_tokenizer
from connectors.embeddings.base import Embedder, EmbeddingError
from connectors.embeddings.openai import OpenAIEmbedder, OpenAIEmbeddingError
from tests.stubs.fixtures import StubServer
from tests.stubs.openai_stub import stub_embedding

EMB = "/v1/embeddings"


def texts(n: int) -> list[str]:
    return [f"chunk {i}: notes about topic {i % 17} and section {i // 17}" for i in range(n)]


def expected(
    inputs: list[str], dims: int = 1536, model: str = "text-embedding-3-small"
) -> np.ndarray:
    return np.vstack([stub_embedding(t, dims, model) for t in inputs])


def embedder(client: AsyncOpenAI, **kw: object) -> OpenAIEmbedder:
    kw.setdefault("backoff_initial_s", 0.05)
    kw.setdefault("backoff_max_s", 0.2)
    return OpenAIEmbedder(client, **kw)  # type: ignore[arg-type]


async def test_protocol(openai_stub_client: AsyncOpenAI) -> None:
    emb = embedder(openai_stub_client)
    assert isinstance(emb, Embedder)
    assert (emb.provider, emb.model, emb.dimensions) == ("openai", "text-embedding-3-small", 1536)
    assert emb.max_input_tokens == 8191 and emb.tokenizer.name == "tiktoken:cl100k_base"


@pytest.mark.parametrize("max_batch_inputs", [2048, 300])
async def test_batches_by_count_and_keeps_order(
    openai_stub: StubServer, openai_stub_client: AsyncOpenAI, max_batch_inputs: int
) -> None:
    inputs = texts(1000)
    batch = await embedder(openai_stub_client, max_batch_inputs=max_batch_inputs).embed(inputs)

    calls = openai_stub.requests_to(EMB)
    assert len(calls) == math.ceil(1000 / max_batch_inputs) == batch.requests
    # Batches run concurrently, so they may arrive in any order; together they must be the
    # inputs, each batch a contiguous run of them, and the result must be in input order.
    position = {text: i for i, text in enumerate(inputs)}
    in_order = sorted(calls, key=lambda c: position[c.body["input"][0]])
    assert [x for c in in_order for x in c.body["input"]] == inputs
    assert all(len(c.body["input"]) <= max_batch_inputs for c in calls)
    assert all(
        c.body["encoding_format"] == "base64" and c.body["dimensions"] == 1536 for c in calls
    )
    np.testing.assert_allclose(batch.vectors, expected(inputs), atol=1e-6)
    assert batch.tokens == sum(tiktoken_tokenizer().count_batch(inputs))


async def test_batches_by_tokens(openai_stub: StubServer, openai_stub_client: AsyncOpenAI) -> None:
    tok = tiktoken_tokenizer()
    inputs = [f"{i:03d}" + " note" * 99 for i in range(40)]
    assert {tok.count(t) for t in inputs} == {100}
    batch = await embedder(openai_stub_client, max_batch_tokens=1000).embed(inputs)

    calls = openai_stub.requests_to(EMB)
    assert len(calls) == 4 == batch.requests
    assert all(sum(tok.count(x) for x in c.body["input"]) <= 1000 for c in calls)
    assert batch.tokens == 4000
    np.testing.assert_allclose(batch.vectors, expected(inputs), atol=1e-6)


async def test_concurrency_is_bounded(
    openai_stub: StubServer, openai_stub_client: AsyncOpenAI
) -> None:
    openai_stub.set_delay(0.3)
    inputs = texts(60)
    await embedder(openai_stub_client, max_batch_inputs=10, max_concurrency=2).embed(inputs)
    arrivals = sorted(c.time for c in openai_stub.requests_to(EMB))
    assert len(arrivals) == 6
    in_flight = [sum(1 for a in arrivals if t <= a < t + 0.25) for t in arrivals]
    assert max(in_flight) == 2  # concurrency used, never exceeded


async def test_base64_equals_float(
    openai_stub: StubServer, openai_stub_client: AsyncOpenAI
) -> None:
    inputs = texts(25)
    b64 = await embedder(openai_stub_client).embed(inputs)
    flt = await embedder(openai_stub_client, encoding_format="float").embed(inputs)
    formats = [c.body["encoding_format"] for c in openai_stub.requests_to(EMB)]
    assert formats == ["base64", "float"]
    assert np.array_equal(b64.vectors, flt.vectors)


async def test_dimensions_only_for_v3_models(
    openai_stub: StubServer, openai_stub_client: AsyncOpenAI
) -> None:
    small = await embedder(openai_stub_client, dimensions=256).embed(["a note"])
    ada = await embedder(openai_stub_client, model="text-embedding-ada-002").embed(["a note"])
    first, second = openai_stub.requests_to(EMB)
    assert first.body["dimensions"] == 256 and "dimensions" not in second.body
    assert small.vectors.shape == (1, 256) and ada.vectors.shape == (1, 1536)
    np.testing.assert_allclose(
        small.vectors[0], stub_embedding("a note", 256, "text-embedding-3-small"), atol=1e-6
    )


async def test_wrong_dimensions_from_server_is_an_error(openai_stub_client: AsyncOpenAI) -> None:
    emb = embedder(openai_stub_client, model="text-embedding-ada-002", dimensions=384)
    with pytest.raises(EmbeddingError, match="1536-dimensional") as info:
        await emb.embed(["a note"])
    assert info.value.retryable is False


async def test_retry_after_429_waits_as_told(
    openai_stub: StubServer, openai_stub_client: AsyncOpenAI
) -> None:
    openai_stub.fail_next(429, 1, retry_after=1)
    with capture_logs() as logs:
        batch = await embedder(openai_stub_client).embed(texts(3))
    first, second = openai_stub.requests_to(EMB)
    assert (first.status, second.status) == (429, 200)
    assert second.time - first.time >= 0.95  # the server's wait, not our 0.05 s backoff
    assert batch.requests == 2
    np.testing.assert_allclose(batch.vectors, expected(texts(3)), atol=1e-6)
    retries = [e for e in logs if e["event"] == "embedding.retry"]
    assert len(retries) == 1  # the delay logged is the one slept: nothing added to it
    assert (retries[0]["attempt"], retries[0]["status"], retries[0]["delay"]) == (1, 429, 1.0)


async def test_retry_after_500_with_backoff(
    openai_stub: StubServer, openai_stub_client: AsyncOpenAI
) -> None:
    openai_stub.fail_next(500, 2)
    batch = await embedder(openai_stub_client).embed(texts(3))
    assert [c.status for c in openai_stub.requests_to(EMB)] == [500, 500, 200]
    assert batch.requests == 3
    np.testing.assert_allclose(batch.vectors, expected(texts(3)), atol=1e-6)


async def test_gives_up_after_max_attempts(
    openai_stub: StubServer, openai_stub_client: AsyncOpenAI
) -> None:
    openai_stub.fail_next(503, 10, retry_after=0)
    with pytest.raises(OpenAIEmbeddingError) as info:
        await embedder(openai_stub_client, max_attempts=3).embed(texts(3))
    assert len(openai_stub.requests_to(EMB)) == 3
    assert info.value.retryable is True
    assert (info.value.status, info.value.attempts) == (503, 3)


@pytest.mark.parametrize("status", [400, 401, 404])
async def test_client_errors_not_retried(
    openai_stub: StubServer, openai_stub_client: AsyncOpenAI, status: int
) -> None:
    openai_stub.fail_next(status, 5)
    with pytest.raises(OpenAIEmbeddingError) as info:
        await embedder(openai_stub_client).embed(texts(3))
    assert len(openai_stub.requests_to(EMB)) == 1
    assert (info.value.retryable, info.value.status) == (False, status)


async def test_timeout_is_retried(openai_stub: StubServer, openai_stub_client: AsyncOpenAI) -> None:
    openai_stub.set_delay(1.5, count=1)
    with capture_logs() as logs:
        batch = await embedder(openai_stub_client, timeout_s=0.3).embed(texts(2))
    assert len(openai_stub.requests_to(EMB)) == 2 == batch.requests
    np.testing.assert_allclose(batch.vectors, expected(texts(2)), atol=1e-6)
    retry = next(e for e in logs if e["event"] == "embedding.retry")
    assert retry["status"] is None and retry["error"] == "APITimeoutError"


async def test_one_failing_batch_fails_the_call(
    openai_stub: StubServer, openai_stub_client: AsyncOpenAI
) -> None:
    openai_stub.fail_next(400, 1)
    with pytest.raises(EmbeddingError):
        await embedder(openai_stub_client, max_batch_inputs=5, max_concurrency=1).embed(texts(20))
    await asyncio.sleep(0.3)  # let a request cancelled mid-send reach the log
    # 4 batches planned; the queued ones were cancelled (one may have been on the wire).
    assert 1 <= len(openai_stub.requests_to(EMB)) <= 2


async def test_over_long_input(openai_stub: StubServer, openai_stub_client: AsyncOpenAI) -> None:
    tok = tiktoken_tokenizer()
    long = "lorem ipsum dolor sit amet " * 2000
    assert tok.count(long) > 8191
    emb = embedder(openai_stub_client)
    with pytest.raises(EmbeddingError) as info:
        await emb.embed(["fine", long])
    assert info.value.retryable is False and "input 1" in str(info.value)
    assert openai_stub.requests == []  # rejected before any request

    batch = await emb.embed(["fine", long], truncate=True)
    sent = openai_stub.requests_to(EMB)[0].body["input"]
    assert sent[0] == "fine" and long.startswith(sent[1]) and tok.count(sent[1]) == 8191
    assert batch.tokens == 1 + 8191


async def test_empty_inputs(openai_stub: StubServer, openai_stub_client: AsyncOpenAI) -> None:
    emb = embedder(openai_stub_client)
    nothing = await emb.embed([])
    assert nothing.vectors.shape == (0, 1536) and nothing.requests == 0
    with pytest.raises(EmbeddingError, match="empty") as info:
        await emb.embed(["a", ""])
    assert info.value.retryable is False
    assert openai_stub.requests == []
