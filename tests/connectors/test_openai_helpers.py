"""Pure helpers of the OpenAI embedder: batch planning, Retry-After parsing, retry policy."""

from __future__ import annotations

import base64
import email.utils
import itertools
import time
from types import SimpleNamespace

import httpx2
import numpy as np
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors.embeddings.openai import (
    OpenAIEmbeddingError,
    decode_vectors,
    is_retryable,
    plan_batches,
    retry_after_seconds,
)

REQUEST = httpx2.Request("POST", "http://stub/v1/embeddings")


def status_error(
    status: int, headers: dict[str, str] | None = None, code: str | None = None
) -> openai.APIStatusError:
    response = httpx2.Response(status, headers=headers or {}, request=REQUEST)
    return openai.APIStatusError("boom", response=response, body={"code": code})


@given(st.lists(st.integers(0, 120), max_size=200), st.integers(1, 20), st.integers(1, 400))
def test_plan_batches_covers_in_order_within_limits(
    counts: list[int], max_inputs: int, max_tokens: int
) -> None:
    batches = plan_batches(counts, max_inputs, max_tokens)
    assert [i for b in batches for i in b] == list(range(len(counts)))
    for b in batches:
        assert 1 <= len(b) <= max_inputs
        # Only a single input that alone exceeds the budget may break the token limit.
        assert sum(counts[i] for i in b) <= max_tokens or len(b) == 1
    # Greedy: the next input would not have fitted into the previous batch.
    for prev, nxt in itertools.pairwise(batches):
        first = counts[nxt[0]]
        assert len(prev) == max_inputs or sum(counts[i] for i in prev) + first > max_tokens


def test_plan_batches_examples() -> None:
    assert plan_batches([], 10, 10) == []
    assert plan_batches([5, 5, 5], 2, 100) == [range(0, 2), range(2, 3)]
    assert plan_batches([6, 6, 20, 1], 10, 12) == [range(0, 2), range(2, 3), range(3, 4)]


def test_retry_after_parsing() -> None:
    assert (
        retry_after_seconds(status_error(429, {"retry-after-ms": "250", "retry-after": "9"}))
        == 0.25
    )
    assert retry_after_seconds(status_error(429, {"retry-after": "3"})) == 3.0
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 27 < retry_after_seconds(status_error(503, {"retry-after": when})) <= 30  # type: ignore[operator]
    assert retry_after_seconds(status_error(429, {"retry-after": "soon"})) is None
    assert retry_after_seconds(status_error(429)) is None
    assert retry_after_seconds(openai.APITimeoutError(REQUEST)) is None


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (status_error(429), True),
        (status_error(429, code="insufficient_quota"), False),
        (status_error(500), True),
        (status_error(502), True),
        (status_error(408), True),
        (status_error(400), False),
        (status_error(401), False),
        (status_error(403), False),
        (status_error(404), False),
        (status_error(422), False),
        (openai.APITimeoutError(REQUEST), True),
        (openai.APIConnectionError(request=REQUEST), True),
        (ValueError("x"), False),
    ],
)
def test_retry_policy(exc: BaseException, expected: bool) -> None:
    assert is_retryable(exc) is expected


def test_decode_vectors_places_by_index_and_normalises() -> None:
    a, b = np.array([3, 4], np.float32), np.array([0, 2], np.float32)
    data = [
        SimpleNamespace(index=1, embedding=base64.b64encode(b.tobytes()).decode()),
        SimpleNamespace(index=0, embedding=a.tolist()),
    ]
    np.testing.assert_allclose(decode_vectors(data, 2, 2), [[0.6, 0.8], [0, 1]])
    with pytest.raises(OpenAIEmbeddingError, match="1 of 2"):
        decode_vectors(data[:1], 2, 2)
    with pytest.raises(OpenAIEmbeddingError, match="index"):
        decode_vectors([data[1], data[1]], 2, 2)
