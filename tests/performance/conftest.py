"""Fixtures for the roadmap's performance tests (Phase 5.3)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def openai_api_key() -> str | None:
    """The OpenAI key from the environment, or None (the embedding test then skips)."""
    return os.environ.get("OPENAI_API_KEY")
