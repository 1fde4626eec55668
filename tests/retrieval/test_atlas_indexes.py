"""api.retrieval.atlas_indexes: definitions, planning, waiting — and a clear answer on servers
without Atlas Search (the embedded one)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from api.db.client import create_client
from api.retrieval.atlas_indexes import INDEX_DIR, SearchUnsupported, apply, load_specs, plan


def test_definitions_follow_the_documented_shape() -> None:
    vector, text = load_specs(384)
    assert vector.name == "note_chunks_vector_index" and vector.type == "vectorSearch"
    fields = vector.definition["fields"]
    assert {
        "type": "vector",
        "path": "embedding",
        "numDimensions": 384,
        "similarity": "cosine",
    } in fields
    filters = {f["path"] for f in fields if f["type"] == "filter"}
    assert filters == {"author_id", "note_id", "tags", "note_updated_at"}
    assert text.type == "search" and text.definition["mappings"]["dynamic"] is False
    mapped = text.definition["mappings"]["fields"]
    assert mapped["author_id"]["type"] == "objectId" and mapped["tags"]["type"] == "token"
    assert mapped["note_updated_at"]["type"] == "date"
    raw = json.loads((INDEX_DIR / "note_chunks_vector_index.json").read_text())
    assert raw["fields"][0]["numDimensions"] == 1536, "the file keeps 1536 as its default"
    assert load_specs(1536, vector_name="custom")[0].name == "custom"


SCHEMAS = Path(__file__).resolve().parents[1] / "fixtures" / "search_index_schema"


def _schema_validator(index_type: str) -> Any:
    """MongoDB's own schema for `index_type` definitions, validated as ajv (which its
    authors use) reads it: `$ref` applies together with its sibling keywords and `$schema`
    counts only at the root, i.e. Draft 2019-09 semantics without the nested `$schema`s."""

    def strip(node: Any, root: bool = False) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if root or k != "$schema"}
        return [strip(v) for v in node] if isinstance(node, list) else node

    schema = strip(json.loads((SCHEMAS / f"{index_type}.json").read_text()), root=True)
    return jsonschema.Draft201909Validator(schema)


def _broken(definition: dict[str, Any], where: str) -> dict[str, Any]:
    broken = copy.deepcopy(definition)
    if where == "similarity":
        broken["fields"][0]["similarity"] = "cosinus"
    elif where == "dimensions":
        broken["fields"][0]["numDimensions"] = "384"
    elif where == "field type":
        broken["mappings"]["fields"]["tags"]["type"] = "tokn"
    elif where == "dynamic":
        broken["mappings"]["dynamic"] = "no"
    return broken


@pytest.mark.parametrize("dimensions", [384, 1536])
def test_definitions_are_valid_for_mongodb_own_schema(dimensions: int) -> None:
    for spec in load_specs(dimensions):
        errors = list(_schema_validator(spec.type).iter_errors(spec.definition))
        assert errors == [], (spec.name, [e.message for e in errors])


@pytest.mark.parametrize(
    ("index_type", "where"),
    [
        ("vectorSearch", "similarity"),
        ("vectorSearch", "dimensions"),
        ("search", "field type"),
        ("search", "dynamic"),
    ],
)
def test_mongodb_schema_rejects_broken_definitions(index_type: str, where: str) -> None:
    spec = next(s for s in load_specs(384) if s.type == index_type)
    assert list(_schema_validator(index_type).iter_errors(_broken(spec.definition, where)))


def test_plan_creates_updates_or_leaves_alone() -> None:
    specs = load_specs(1536)
    assert [a.kind for a in plan([], specs)] == ["create", "create"]
    existing = [{"name": s.name, "latestDefinition": s.definition} for s in specs]
    assert [a.kind for a in plan(existing, specs)] == ["unchanged", "unchanged"]
    assert [a.kind for a in plan(existing, load_specs(384))] == ["update", "unchanged"]


def test_defaults_the_server_adds_are_not_a_change() -> None:
    """Atlas reports definitions with defaults filled in; only the keys we set count."""
    specs = load_specs(1536)
    existing = []
    for s in specs:
        padded = copy.deepcopy(s.definition)
        padded["storedSource"] = False
        for field in padded.get("fields", []):
            field.setdefault("quantization", "none")
        if "mappings" in padded:
            padded["analyzer"] = "lucene.standard"
            padded["mappings"].setdefault("fields", {})
        existing.append({"name": s.name, "latestDefinition": padded})
    assert [a.kind for a in plan(existing, specs)] == ["unchanged", "unchanged"]
    changed = copy.deepcopy(existing)
    changed[0]["latestDefinition"]["fields"] = changed[0]["latestDefinition"]["fields"][:-1]
    assert [a.kind for a in plan(changed, specs)] == ["update", "unchanged"]


class FakeAtlasCollection:
    """Atlas' search-index commands, simulated: indexes build for a few polls."""

    def __init__(self) -> None:
        self.indexes: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []

    async def list_search_indexes(self) -> Any:
        for doc in self.indexes.values():
            doc["polls"] += 1
            if doc["polls"] >= 3:
                doc.update(status="READY", queryable=True)

        class Cursor:
            async def to_list(inner) -> list[dict[str, Any]]:
                return [dict(d) for d in self.indexes.values()]

        return Cursor()

    async def create_search_indexes(self, models: list[Any]) -> list[str]:
        for m in models:
            doc = m.document
            self.calls.append(f"create:{doc['name']}:{doc['type']}")
            self.indexes[doc["name"]] = {
                "name": doc["name"],
                "latestDefinition": doc["definition"],
                "status": "BUILDING",
                "queryable": False,
                "polls": 0,
            }
        return [m.document["name"] for m in models]

    async def update_search_index(self, name: str, definition: dict[str, Any]) -> None:
        self.calls.append(f"update:{name}")
        self.indexes[name].update(
            latestDefinition=definition, status="BUILDING", queryable=False, polls=0
        )


async def test_apply_creates_then_waits_until_queryable() -> None:
    coll = FakeAtlasCollection()
    out: list[str] = []
    actions = await apply(coll, load_specs(1536), poll_s=0, echo=out.append)  # type: ignore[arg-type]
    assert [a.kind for a in actions] == ["create", "create"]
    assert coll.calls == [
        "create:note_chunks_vector_index:vectorSearch",
        "create:note_chunks_text_index:search",
    ]
    assert any(line.startswith("waiting for") for line in out)
    assert out[-1] == "all search indexes are queryable"
    again = await apply(coll, load_specs(384), poll_s=0, echo=out.append)  # type: ignore[arg-type]
    assert [a.kind for a in again] == ["update", "unchanged"]
    assert coll.calls[-1] == "update:note_chunks_vector_index"


async def test_servers_without_search_get_a_clear_message(mongo_url: str, db_name: str) -> None:
    client = create_client(mongo_url)
    try:
        with pytest.raises(SearchUnsupported, match="local search backend"):
            await apply(client[db_name].note_chunks, load_specs(384), echo=lambda _: None)
    finally:
        await client.close()


async def test_older_chunks_get_their_note_time(mongo_url: str, db_name: str) -> None:
    """Chunks written before they carried `note_updated_at` get their note's time (None
    when the note is gone); chunks that have it keep it; a second run changes nothing."""
    from datetime import UTC, datetime

    from bson import ObjectId
    from pymongo import AsyncMongoClient

    from api.retrieval.atlas_indexes import backfill_note_times

    client: AsyncMongoClient = AsyncMongoClient(mongo_url, tz_aware=True)
    db = client[db_name]
    try:
        when, kept = datetime(2026, 3, 1, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC)
        notes = [ObjectId() for _ in range(3)]
        await db.notes.insert_many([{"_id": n, "updated_at": when} for n in notes[:2]])
        await db.note_chunks.insert_many(
            [{"note_id": n, "chunk_index": i} for n in notes for i in range(2)]
            + [{"note_id": notes[0], "chunk_index": 9, "note_updated_at": kept}]
        )
        assert await backfill_note_times(db, batch=1) == 6
        times = {
            (d["note_id"], d["chunk_index"]): d["note_updated_at"]
            async for d in db.note_chunks.find()
        }
        assert {times[(n, i)] for n in notes[:2] for i in range(2)} == {when}
        assert times[(notes[2], 0)] is None and times[(notes[0], 9)] == kept
        assert await backfill_note_times(db) == 0
    finally:
        await client.drop_database(db_name)
        await client.close()
