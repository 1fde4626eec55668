"""Fixtures for the migration tests: the test's settings and a database handle."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from api.config import Settings
from api.db.client import create_client


@pytest.fixture
def settings(make_settings: Any) -> Settings:
    """Settings for this test's own database (local embedder, quick retries)."""
    return make_settings(autonote_index_backoff_base_s=0.05, autonote_index_backoff_max_s=0.2)


@pytest.fixture
async def db(settings: Settings) -> AsyncIterator[AsyncDatabase]:
    """A client on the test's database (dropped by make_settings afterwards)."""
    client = create_client(str(settings.mongodb_url))
    try:
        yield client[settings.mongodb_db]
    finally:
        await client.close()
