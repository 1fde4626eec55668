"""LocalEmbedder against the real packaged ONNX model (no fakes)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import numpy as np
import pytest

from connectors.embeddings.base import Embedder, EmbeddingError
from connectors.embeddings.local import MAX_INPUT_TOKENS, LocalEmbedder

TEXTS = [
    "How do I reset my password?",
    "MongoDB stores documents in collections.",
    "x",
    "The quarterly report shows revenue grew by twelve percent compared with last year, "
    "driven mostly by subscriptions in the European market and lower churn.",
    "",
    "Heading > Sub heading\n\n```python\nprint('hello')\n```",
    "東京は日本の首都です。 🚀",
]

# (a, b) paraphrases; every a_i must be closer to b_i than to any other b_j.
PARAPHRASES = [
    ("How can I change my account password?", "What are the steps to reset my login password?"),
    ("The cat is sleeping on the sofa.", "A kitten naps on the couch."),
    (
        "Interest rates were raised by the central bank.",
        "The central bank increased borrowing costs.",
    ),
    (
        "Add an index to speed up the database query.",
        "Creating a database index makes the query faster.",
    ),
    ("It is going to rain heavily tomorrow.", "Tomorrow's forecast predicts a lot of rain."),
]


def long_text(pieces: int, embedder: LocalEmbedder) -> str:
    """Text of exactly `pieces` word pieces."""
    text = " ".join(f"word{i}" for i in range(pieces))
    ids = embedder.tokenizer.encode(text)
    assert len(ids) >= pieces
    head = embedder.tokenizer.split_at_tokens(text, pieces)[0]
    assert embedder.tokenizer.count(head) == pieces
    return head


async def test_satisfies_protocol_and_metadata(local_embedder: LocalEmbedder) -> None:
    assert isinstance(local_embedder, Embedder)
    assert (local_embedder.provider, local_embedder.model) == (
        "local",
        "all-MiniLM-L6-v2-onnx-int8",
    )
    assert local_embedder.dimensions == 384
    assert local_embedder.max_input_tokens == 254
    assert local_embedder.tokenizer.count("hello world") == 2


async def test_shapes_norms_and_tokens(local_embedder: LocalEmbedder) -> None:
    batch = await local_embedder.embed(TEXTS)
    assert batch.vectors.shape == (len(TEXTS), 384)
    assert batch.vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(batch.vectors, axis=1), 1.0, atol=1e-5)
    assert batch.tokens == sum(local_embedder.tokenizer.count(t) for t in TEXTS)
    assert len({v.tobytes() for v in batch.vectors}) == len(TEXTS)  # all distinct


async def test_empty_list(local_embedder: LocalEmbedder) -> None:
    batch = await local_embedder.embed([])
    assert batch.vectors.shape == (0, 384)
    assert (batch.tokens, batch.requests) == (0, 0)


async def test_deterministic_and_sync_equals_async(local_embedder: LocalEmbedder) -> None:
    first = await local_embedder.embed(TEXTS)
    second = await local_embedder.embed(TEXTS)
    assert np.array_equal(first.vectors, second.vectors)
    assert np.array_equal(first.vectors, local_embedder.embed_sync(TEXTS).vectors)


async def test_batching_invariance(local_embedder: LocalEmbedder) -> None:
    """A text's vector does not depend on what else is in its batch (padding, batch size)."""
    alone = np.vstack([(await local_embedder.embed([t])).vectors for t in TEXTS])
    together = (await local_embedder.embed(TEXTS)).vectors
    np.testing.assert_allclose(together, alone, atol=1e-5)
    small = LocalEmbedder(batch_size=2)
    try:
        np.testing.assert_allclose((await small.embed(TEXTS)).vectors, alone, atol=1e-5)
    finally:
        await small.aclose()


async def test_order_restored_after_length_sorting() -> None:
    """Inputs in decreasing length across several batches come back in input order."""
    embedder = LocalEmbedder(batch_size=3)
    try:
        texts = [" ".join(["token"] * n) + f" #{n}" for n in (40, 3, 25, 1, 60, 9, 14, 2)]
        batch = await embedder.embed(texts)
        assert batch.requests == 3  # ceil(8 / 3) model runs
        for text, vec in zip(texts, batch.vectors, strict=True):
            alone = (await embedder.embed([text])).vectors[0]
            assert float(vec @ alone) > 1 - 1e-5, text
    finally:
        await embedder.aclose()


async def test_semantic_sanity(local_embedder: LocalEmbedder) -> None:
    a = (await local_embedder.embed([p[0] for p in PARAPHRASES])).vectors
    b = (await local_embedder.embed([p[1] for p in PARAPHRASES])).vectors
    sims = a @ b.T
    for i in range(len(PARAPHRASES)):
        others = np.delete(sims[i], i)
        assert sims[i, i] > others.max() + 0.1, (PARAPHRASES[i], sims[i])


async def test_over_long_input_rejected_unless_truncate(local_embedder: LocalEmbedder) -> None:
    at_limit = long_text(MAX_INPUT_TOKENS, local_embedder)
    over = long_text(MAX_INPUT_TOKENS + 40, local_embedder)
    ok = await local_embedder.embed([at_limit])
    assert ok.tokens == MAX_INPUT_TOKENS

    with pytest.raises(EmbeddingError) as info:
        await local_embedder.embed(["short", over])
    assert info.value.retryable is False
    assert "input 1" in str(info.value)
    with pytest.raises(EmbeddingError):
        local_embedder.embed_sync([over])

    truncated = await local_embedder.embed([over], truncate=True)
    assert truncated.tokens == MAX_INPUT_TOKENS
    head = local_embedder.tokenizer.split_at_tokens(over, MAX_INPUT_TOKENS)[0]
    expected = (await local_embedder.embed([head])).vectors
    np.testing.assert_allclose(truncated.vectors, expected, atol=1e-5)


async def test_concurrent_calls_are_safe(local_embedder: LocalEmbedder) -> None:
    groups = [TEXTS[i:] + TEXTS[:i] for i in range(4)]
    results = await asyncio.gather(*(local_embedder.embed(g) for g in groups))
    for group, result in zip(groups, results, strict=True):
        assert np.array_equal(result.vectors, local_embedder.embed_sync(group).vectors)


async def test_event_loop_not_blocked(local_embedder: LocalEmbedder) -> None:
    texts = [f"Sentence number {i} about notes, search and embeddings. " * 6 for i in range(32)]
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    started = time.perf_counter()
    await local_embedder.embed(texts)
    elapsed = time.perf_counter() - started
    done.set()
    await task
    assert elapsed > 0.2  # long enough that a blocked loop would show
    assert max(gaps) < max(0.15, elapsed / 3), (max(gaps), elapsed)


async def test_a_query_does_not_wait_behind_indexing_batches(
    local_embedder: LocalEmbedder,
) -> None:
    """Two indexing loops keep batches queued on the model; a search query (a call of a few
    texts) runs on its own thread instead of waiting for the batches queued before it."""
    backlog = [f"Paragraph {i} about leases, queues and vector search. " * 12 for i in range(64)]
    started = time.perf_counter()
    local_embedder.embed_sync(backlog[:32])  # one indexing batch, for scale
    batch_s = time.perf_counter() - started
    query_s: list[float] = []

    async def query() -> None:
        await asyncio.sleep(0.1)  # both loops have batches queued by now
        started = time.perf_counter()
        vec = await local_embedder.embed(["where is the lease renewed?"], truncate=True)
        query_s.append(time.perf_counter() - started)
        assert vec.vectors.shape == (1, 384)

    await asyncio.gather(local_embedder.embed(backlog), local_embedder.embed(backlog), query())
    # Behind the queue it waited for the running batch and the other loop's: > 1 batch.
    assert query_s[0] < 0.5 * batch_s, (query_s, batch_s)


def test_missing_tokenizer_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"tokenizer not found.*autonote"):
        LocalEmbedder(tokenizer_path=tmp_path / "nope.json")


def test_the_arena_gives_memory_back_after_each_run() -> None:
    """onnxruntime's CPU arena kept the peak of every padded batch shape: an API process
    held ~1.25 GB after indexing, for good. Two child processes embed
    the same 96 texts, one with the default run options, one without shrinkage."""
    from benchmarks.investigations import embedding_memory

    results = embedding_memory.measure(rounds=1, texts=96, repeats=1)
    shrunk, kept = (results[m][0]["rss"][-1] for m in embedding_memory.MODES)
    assert shrunk < 0.75 * kept, (shrunk, kept)
