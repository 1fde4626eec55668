"""`autonote indexes create` against a live deployment, and start-up's index check."""

from __future__ import annotations

import secrets
from collections.abc import Callable

import pytest

from api.config import LOCAL_EMBEDDING_DIMENSIONS, Settings
from api.db.search import search_indexes
from api.errors import StartupError
from api.retrieval.atlas_indexes import load_specs, plan
from tests.atlas_live.live import MODES, search
from tests.conftest import Api, running_app

# Setting up the session (building both indexes) may fall to any test of this module.
pytestmark = pytest.mark.timeout(900)


async def test_indexes_are_queryable_with_the_configured_dimensions(atlas_api: Api) -> None:
    settings, embedder = atlas_api.container.settings, atlas_api.container.embedder
    indexes = await search_indexes(atlas_api.container.db)
    vector, text = indexes[settings.atlas_vector_index], indexes[settings.atlas_text_index]
    for doc in (vector, text):
        assert doc.get("queryable") is True and doc.get("status") == "READY", doc
    dimensions = [
        field["numDimensions"]
        for field in vector["latestDefinition"]["fields"]
        if field["type"] == "vector"
    ]
    assert dimensions == [embedder.dimensions] == [LOCAL_EMBEDDING_DIMENSIONS]
    assert text["latestDefinition"]["mappings"]["dynamic"] is False
    # What the server reports (its defaults filled in) counts as our definitions: running
    # `autonote indexes create` again would change nothing.
    specs = load_specs(
        embedder.dimensions,
        vector_name=settings.atlas_vector_index,
        text_name=settings.atlas_text_index,
    )
    assert [action.kind for action in plan(list(indexes.values()), specs)] == [
        "unchanged",
        "unchanged",
    ]


@pytest.mark.parametrize("backend", ["atlas", "auto"])
async def test_start_up_uses_atlas_once_the_indexes_are_queryable(
    atlas_indexes: Settings, live_settings: Callable[..., Settings], backend: str
) -> None:
    async with running_app(live_settings(search_backend=backend)) as api:
        assert api.container.search.backend.name == "atlas"
        headers = await api.new_user("startup")
        for mode in MODES:  # a user without notes: every pipeline runs, nothing is found
            assert (await search(api, headers, "anything at all", mode=mode))["results"] == []


@pytest.mark.parametrize(
    ("field", "variable"),
    [("atlas_text_index", "ATLAS_TEXT_INDEX"), ("atlas_vector_index", "ATLAS_VECTOR_INDEX")],
)
async def test_start_up_refuses_an_index_that_does_not_exist(
    atlas_indexes: Settings, live_settings: Callable[..., Settings], field: str, variable: str
) -> None:
    missing = f"autonote_live_missing_{secrets.token_hex(4)}"
    with pytest.raises(StartupError) as refused:
        async with running_app(live_settings(**{field: missing})):
            pass
    message = str(refused.value)
    assert f"{missing!r} ({variable}) does not exist" in message, message
    assert "autonote indexes create" in message, message
