"""Choosing the search backend: `auto` falls back to the in-process index only when the
server says it has no search; any other refusal, and a missing or unready Atlas index, stops
start-up with a message that names the fix."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from pymongo import AsyncMongoClient
from pymongo.errors import OperationFailure

from api.db.search import SEARCH_UNAVAILABLE_CODES, choose_backend
from api.errors import StartupError

INDEXES = {"vector_index": "vec", "text_index": "txt"}


class _Cursor:
    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs = docs

    def __aiter__(self) -> Any:
        async def gen() -> Any:
            for d in self.docs:
                yield d

        return gen()


class _Chunks:
    """`note_chunks` of a server with search: answers `$listSearchIndexes`, or refuses."""

    def __init__(self, docs: list[dict[str, Any]] | None = None, error: Exception | None = None):
        self.docs, self.error = docs or [], error

    async def list_search_indexes(self) -> _Cursor:
        if self.error is not None:
            raise self.error
        return _Cursor(self.docs)


def _db(**kwargs: Any) -> Any:
    return SimpleNamespace(note_chunks=_Chunks(**kwargs))


def _ready(name: str) -> dict[str, Any]:
    return {"name": name, "status": "READY", "queryable": True}


async def test_local_is_chosen_without_asking_the_server() -> None:
    refusing = _db(error=OperationFailure("unauthorized", 13))
    assert await choose_backend(refusing, "local", **INDEXES) == "local"


@pytest.mark.parametrize("code", sorted(SEARCH_UNAVAILABLE_CODES))
async def test_auto_falls_back_on_search_not_enabled(code: int) -> None:
    db = _db(error=OperationFailure("search not enabled", code))
    assert await choose_backend(db, "auto", **INDEXES) == "local"


@pytest.mark.parametrize("setting", ["auto", "atlas"])
async def test_another_refusal_stops_start_up(setting: str) -> None:
    err = OperationFailure("not authorized on autonote", 13, {"codeName": "Unauthorized"})
    with pytest.raises(StartupError) as caught:
        await choose_backend(_db(error=err), setting, **INDEXES)
    message = str(caught.value)
    assert "code 13 Unauthorized" in message and "SEARCH_BACKEND=local" in message


async def test_atlas_on_a_server_without_search_stops_start_up() -> None:
    db = _db(error=OperationFailure("no search", 115))
    with pytest.raises(StartupError, match="has no Atlas Search"):
        await choose_backend(db, "atlas", **INDEXES)


@pytest.mark.parametrize("setting", ["auto", "atlas"])
@pytest.mark.parametrize(
    ("present", "missing", "variable"),
    [(["txt"], "vec", "ATLAS_VECTOR_INDEX"), (["vec"], "txt", "ATLAS_TEXT_INDEX")],
)
async def test_a_missing_index_is_named(
    setting: str, present: list[str], missing: str, variable: str
) -> None:
    db = _db(docs=[_ready(n) for n in present])
    with pytest.raises(StartupError) as caught:
        await choose_backend(db, setting, **INDEXES)
    message = str(caught.value)
    assert repr(missing) in message and variable in message
    assert "autonote indexes create" in message


async def test_an_index_still_building_stops_start_up() -> None:
    building = {"name": "txt", "status": "BUILDING", "queryable": False}
    with pytest.raises(StartupError, match=r"'txt' .* not queryable yet \(status BUILDING\)"):
        await choose_backend(_db(docs=[_ready("vec"), building]), "atlas", **INDEXES)


async def test_both_indexes_queryable_choose_atlas() -> None:
    db = _db(docs=[_ready("vec"), _ready("txt"), _ready("other")])
    assert await choose_backend(db, "auto", **INDEXES) == "atlas"


async def test_the_embedded_server_answers_search_not_enabled(mongo_url: str) -> None:
    """The real embedded server: `auto` runs locally, `atlas` is refused."""
    client: AsyncMongoClient = AsyncMongoClient(mongo_url)
    try:
        db = client["selection_probe"]
        assert await choose_backend(db, "auto", **INDEXES) == "local"
        with pytest.raises(StartupError, match="has no Atlas Search"):
            await choose_backend(db, "atlas", **INDEXES)
    finally:
        await client.close()
