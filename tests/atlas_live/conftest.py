"""Fixtures of the live Atlas suite, opt-in: `AUTONOTE_TEST_ATLAS_URL` names a deployment
with Atlas Search (an Atlas cluster, or the `mongodb/mongodb-atlas-local` image); without it
every test here is skipped, for one reason. See docs/operations.md (Testing against Atlas).

One throwaway database per session, `autonote_live_<random>`, dropped at the end (its search
indexes go with its collections). The search indexes are created once per session by the
code of `autonote indexes create`, then one app serves the search tests.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from pymongo import MongoClient

import api.cli.indexes as indexes_cli
from api.config import Settings
from tests.conftest import Api, running_app, settings_for_tests

URL_VARIABLE = "AUTONOTE_TEST_ATLAS_URL"
SKIP_REASON = (
    f"{URL_VARIABLE} is not set: the live Atlas Search suite needs a deployment with "
    "Atlas Search (docs/operations.md, Testing against Atlas)"
)
# Bound on building both search indexes on the empty collection (`autonote indexes create`
# polls `$listSearchIndexes` until both are queryable).
INDEX_BUILD_TIMEOUT_S = 600.0


def _url() -> str:
    return os.environ.get(URL_VARIABLE, "").strip()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Without the URL every test of this folder is skipped before its fixtures run; the
    skip is raised here, so `-rs` reports the whole suite as one line."""
    if not _url():
        pytest.skip(SKIP_REASON)


@pytest.fixture(scope="session")
def atlas_url() -> str:
    url = _url()
    if not url:
        pytest.skip(SKIP_REASON)
    if not url.startswith(("mongodb://", "mongodb+srv://")):
        pytest.fail(f"{URL_VARIABLE} must be a mongodb:// or mongodb+srv:// URL", pytrace=False)
    return url


@pytest.fixture(scope="session")
def live_db(atlas_url: str) -> Iterator[str]:
    """The session's database name; the database is dropped after the last test."""
    name = f"autonote_live_{secrets.token_hex(6)}"
    yield name
    client: MongoClient = MongoClient(atlas_url, serverSelectionTimeoutMS=30_000)
    try:
        client.drop_database(name)
    finally:
        client.close()


@pytest.fixture(scope="session")
def live_settings(
    atlas_url: str, live_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Callable[..., Settings]:
    """Settings for the session database with SEARCH_BACKEND=atlas (the tests' isolated
    defaults: local embedding model, no default user, no rate limit); overrides win. A
    remote cluster gets more than the default 3 s to answer."""
    data_dir = tmp_path_factory.mktemp("atlas_live")

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "search_backend": "atlas",
            "mongodb_timeout_ms": 20_000,
            "log_level": "ERROR",
            **overrides,
        }
        return settings_for_tests(atlas_url, live_db, data_dir, **values)

    return make


@pytest.fixture(scope="session")
async def atlas_indexes(live_settings: Callable[..., Settings]) -> Settings:
    """`autonote indexes create` (api.cli.indexes.run: ensure the collections, create both
    search indexes with `numDimensions` from the configured model, wait until queryable,
    backfill) on the session database; the settings it ran with. Only where the command
    reads its settings from is replaced: it gets the suite's instead of the environment."""
    settings = live_settings()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(indexes_cli, "settings_or_exit", lambda: settings)
        code = await indexes_cli.run(wait=True, timeout_s=INDEX_BUILD_TIMEOUT_S)
    assert code == 0, (
        f"`autonote indexes create` exited {code}: {URL_VARIABLE} points at a deployment "
        "without Atlas Search"
    )
    return settings


@pytest.fixture(scope="session")
async def atlas_api(atlas_indexes: Settings) -> AsyncIterator[Api]:
    """The app with SEARCH_BACKEND=atlas on the session database (indexes ready), shared by
    the search tests; each test works as users of its own."""
    async with running_app(atlas_indexes) as api:
        yield api
