"""LocalEmbedder against the real packaged ONNX model (no fakes)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

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


async def test_event_loop_not_blocked(
    local_embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Word pieces and model runs happen on the embedder's threads, and the event loop
    keeps turning while a batch runs: each batch here first waits for a turn of the loop
    that comes after it started (run on the loop's thread, it would wait in vain, 60 s)."""
    texts = [f"Sentence number {i} about notes, search and embeddings. " * 6 for i in range(32)]
    loop_thread = threading.get_ident()
    turned = threading.Event()
    threads: list[int] = []
    batches_saw_the_loop_turn: list[bool] = []
    word_pieces, run_batch = local_embedder._word_pieces, local_embedder._run_batch

    def watched_word_pieces(*args: Any) -> Any:
        threads.append(threading.get_ident())
        return word_pieces(*args)

    def watched_run_batch(batch: list[list[int]]) -> Any:
        threads.append(threading.get_ident())
        turned.clear()
        batches_saw_the_loop_turn.append(turned.wait(60))
        return run_batch(batch)

    monkeypatch.setattr(local_embedder, "_word_pieces", watched_word_pieces)
    monkeypatch.setattr(local_embedder, "_run_batch", watched_run_batch)
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            turned.set()
            await asyncio.sleep(0.005)

    task = asyncio.create_task(ticker())
    try:
        result = await local_embedder.embed(texts)
    finally:
        done.set()
        await task
    assert result.vectors.shape == (32, 384)
    assert threads and loop_thread not in threads
    assert batches_saw_the_loop_turn == [True]


async def test_a_query_does_not_wait_behind_indexing_batches(
    local_embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two indexing loops keep batches queued on the model; a search query (a call of a few
    texts) runs on its own thread instead of waiting for the batches queued before it.
    Here the indexing thread's first batch is held until the query is answered: behind the
    queue the query would wait for it (and fail at the 60 s bound)."""
    backlog = [f"Paragraph {i} about leases, queues and vector search. " * 12 for i in range(64)]
    holding, answered = threading.Event(), threading.Event()
    finished: list[int] = []  # the size of each batch that finished, in order
    run_batch = local_embedder._run_batch

    def held(batch: list[list[int]]) -> Any:
        if threading.current_thread().name.startswith("local-embedder"):  # indexing
            holding.set()
            answered.wait(120)
        out = run_batch(batch)
        finished.append(len(batch))
        return out

    monkeypatch.setattr(local_embedder, "_run_batch", held)
    indexing = [asyncio.create_task(local_embedder.embed(backlog)) for _ in range(2)]
    try:
        assert await asyncio.to_thread(holding.wait, 60), "no indexing batch started"
        query = local_embedder.embed(["where is the lease renewed?"], truncate=True)
        vec = await asyncio.wait_for(query, timeout=60)
        assert finished == [1], "the query was answered before any indexing batch finished"
    finally:
        answered.set()
        await asyncio.gather(*indexing)
    assert vec.vectors.shape == (1, 384)
    assert finished[1:] == [32] * 4  # then both loops' batches: 2 x 64 texts, 32 a batch


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
