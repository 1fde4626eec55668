"""Fixtures for connector tests: the OpenAI stub (see tests/stubs) and one local embedder."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from connectors.embeddings.local import LocalEmbedder
from tests.stubs.fixtures import (  # noqa: F401 - pytest finds fixtures by name here
    openai_stub,
    openai_stub_client,
    openai_stub_server,
)


@pytest.fixture(scope="session")
async def local_embedder() -> AsyncIterator[LocalEmbedder]:
    """One loaded local model for the session (loading costs ~0.3 s)."""
    embedder = LocalEmbedder()
    embedder.load()
    yield embedder
    await embedder.aclose()
