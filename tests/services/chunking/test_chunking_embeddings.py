"""`generate_embeddings`: the one call of the original design that embeds chunks, with the
real `openai` client against the local stub and with the real local model; and the chunker
package itself loading no client."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest

from api.services.chunking import MarkdownChunker
from connectors.embeddings.base import EmbeddingError
from connectors.embeddings.local import LocalEmbedder
from tests.api import test_chunking as original  # modules: pytest collects their tests once
from tests.performance import test_chunking_performance as original_speed
from tests.stubs.fixtures import StubServer
from tests.stubs.openai_stub import stub_embedding

NOTE = "## Setup\n\nInstall it.\n\n## Usage\n\nRun it.\n\n## Setup\n\nInstall it.\n"
EMBEDDINGS = "/v1/embeddings"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """No configuration from the machine running the tests (a developer's OPENAI_API_KEY,
    a CI's EMBEDDING_PROVIDER): each test sets what it means."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "EMBEDDING_", "CHUNKING_", "MONGODB_")):
            monkeypatch.delenv(name)
    yield monkeypatch


@pytest.fixture
def stub_env(clean_env: pytest.MonkeyPatch, openai_stub: StubServer) -> StubServer:
    """The environment the original chunking tests expect (a key), pointed at the stub."""
    clean_env.setenv("OPENAI_API_KEY", "sk-stub")
    clean_env.setenv("OPENAI_BASE_URL", openai_stub.base_url)
    return openai_stub


async def test_the_original_embedding_tests_pass_with_a_key(stub_env: StubServer) -> None:
    # The original chunking tests, exactly as written; they skip without OPENAI_API_KEY.
    await original.TestMarkdownChunker().test_embedding_generation()
    (request,) = stub_env.requests_to(EMBEDDINGS)
    assert request.body["input"] == ["Embedding Test > Test\n\nThis is a test."]
    assert request.body["model"] == "text-embedding-3-small"
    await original_speed.TestChunkingPerformance().test_embedding_generation_speed("sk-stub")
    assert len(stub_env.requests_to(EMBEDDINGS)) == 2
    assert len(stub_env.requests_to(EMBEDDINGS)[1].body["input"]) == 10  # one batched call


async def test_each_chunk_gets_its_own_texts_vector_and_repeats_are_sent_once(
    stub_env: StubServer,
) -> None:
    chunks = MarkdownChunker().chunk_note(NOTE, "Guide")
    assert [c.embedding for c in chunks] == [None] * 3
    assert chunks[0].embedding_text == chunks[2].embedding_text  # same section twice
    returned = await MarkdownChunker().generate_embeddings(chunks)
    assert returned == chunks and all(a is b for a, b in zip(returned, chunks, strict=True))
    (request,) = stub_env.requests_to(EMBEDDINGS)
    assert request.body["input"] == [chunks[0].embedding_text, chunks[1].embedding_text]
    for chunk in chunks:
        expected = stub_embedding(chunk.embedding_text, 1536, "text-embedding-3-small")
        assert chunk.embedding is not None and len(chunk.embedding) == 1536
        np.testing.assert_allclose(chunk.embedding, expected, atol=1e-6)
    assert chunks[0].to_dict()["embedding"] == chunks[0].embedding
    assert chunks[0].embedding is not chunks[2].embedding  # no shared, mutable list


async def test_a_key_passed_as_the_original_tests_do_is_used(
    clean_env: pytest.MonkeyPatch, openai_stub: StubServer
) -> None:
    """`generate_embeddings(chunks, openai_api_key)` (Phase 5.3): that key, OpenAI's model,
    even with no key in the environment and the local provider asked for there."""
    clean_env.setenv("OPENAI_BASE_URL", openai_stub.base_url)
    clean_env.setenv("EMBEDDING_PROVIDER", "local")
    chunks = MarkdownChunker().chunk_note(NOTE, "Guide")
    await MarkdownChunker().generate_embeddings(chunks, "sk-given")
    (request,) = openai_stub.requests_to(EMBEDDINGS)
    assert request.headers["authorization"] == "Bearer sk-given"
    assert all(c.embedding is not None and len(c.embedding) == 1536 for c in chunks)


async def test_a_failed_request_sets_no_embedding(stub_env: StubServer) -> None:
    chunks = MarkdownChunker().chunk_note(NOTE, "Guide")
    stub_env.fail_next(400, path=EMBEDDINGS)
    with pytest.raises(EmbeddingError):
        await MarkdownChunker().generate_embeddings(chunks)
    assert [c.embedding for c in chunks] == [None] * 3


async def test_no_chunks_no_request(stub_env: StubServer) -> None:
    assert await MarkdownChunker().generate_embeddings([]) == []
    assert stub_env.requests_to(EMBEDDINGS) == []


async def test_an_injected_local_model_embeds_chunks_sized_for_it() -> None:
    embedder = LocalEmbedder()
    try:
        chunker = MarkdownChunker(
            max_chunk_tokens=200,
            tokenizer=embedder.tokenizer,
            max_input_tokens=embedder.max_input_tokens,
        )
        chunks = chunker.chunk_note(NOTE, "Guide")
        await chunker.generate_embeddings(chunks, embedder=embedder)
        direct = (await embedder.embed([c.embedding_text for c in chunks])).vectors
    finally:
        await embedder.aclose()
    for chunk, vector in zip(chunks, direct, strict=True):
        assert chunk.embedding is not None and len(chunk.embedding) == 384
        np.testing.assert_allclose(chunk.embedding, vector, atol=1e-5)


async def test_chunks_sized_for_another_model_are_refused_before_any_work(
    clean_env: pytest.MonkeyPatch,
) -> None:
    """cl100k chunks of up to 8191 tokens would not fit MiniLM's 256 word pieces: a clear
    error up front instead of the model refusing (or truncating) some of them."""
    chunks = MarkdownChunker().chunk_note(NOTE, "Guide")
    embedder = LocalEmbedder()
    try:
        with pytest.raises(ValueError, match=r"tokenizer=embedder\.tokenizer"):
            await MarkdownChunker().generate_embeddings(chunks, embedder=embedder)
        same_tokens = MarkdownChunker(tokenizer=embedder.tokenizer)  # but 8191 per input
        with pytest.raises(ValueError, match=f"max_input_tokens={embedder.max_input_tokens}$"):
            await same_tokens.generate_embeddings(chunks, embedder=embedder)
    finally:
        await embedder.aclose()
    # No key configured: the environment's embedder is the local model, refused the same way.
    with pytest.raises(ValueError, match="embedder counts"):
        await MarkdownChunker().generate_embeddings(chunks)
    assert [c.embedding for c in chunks] == [None] * 3


def test_importing_the_chunker_loads_no_client() -> None:
    """The chunker is a pure library (docs/chunking.md): `generate_embeddings` imports the
    providers only when it is called without an embedder."""
    code = (
        "import sys, api.services.chunking\n"
        "mods = ('openai', 'pymongo', 'fastapi', 'httpx', 'api.providers', 'connectors')\n"
        "print(sorted(m for m in mods if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
