"""Creating or updating the Atlas Search indexes of `note_chunks` (`autonote indexes create`).

`numDimensions` comes from the configured embedding model. Existing indexes with the same
definition are left alone; a changed definition is updated in place (`updateSearchIndex`).
Needs Atlas (or MongoDB 8.2+ with mongot): on other servers it explains that the local
search backend is used instead and exits with status 2.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import OperationFailure
from pymongo.operations import SearchIndexModel

from api.chunk_store.repository import ChunksRepository
from api.db.search import SEARCH_UNAVAILABLE_CODES
from api.notes.repository import NotesRepository

INDEX_DIR = Path(__file__).resolve().parents[2] / "atlas_indexes"
FILES = ("note_chunks_vector_index.json", "note_chunks_text_index.json")


@dataclass(frozen=True)
class IndexSpec:
    name: str
    type: Literal["vectorSearch", "search"]
    definition: dict[str, Any]


@dataclass(frozen=True)
class Action:
    kind: Literal["create", "update", "unchanged"]
    spec: IndexSpec


def load_specs(
    dimensions: int,
    *,
    vector_name: str | None = None,
    text_name: str | None = None,
    directory: Path = INDEX_DIR,
) -> list[IndexSpec]:
    """The index definitions from `atlas_indexes/`, with `numDimensions` = `dimensions`."""
    specs = []
    for filename in FILES:
        raw = json.loads((directory / filename).read_text())
        name, kind = raw.pop("name"), raw.pop("type")
        if kind == "vectorSearch":
            name = vector_name or name
            for field in raw["fields"]:
                if field["type"] == "vector":
                    field["numDimensions"] = dimensions
        else:
            name = text_name or name
        specs.append(IndexSpec(name=name, type=kind, definition=raw))
    return specs


def plan(existing: list[dict[str, Any]], specs: list[IndexSpec]) -> list[Action]:
    """What to do for each spec given the server's `list_search_indexes()` documents."""
    by_name = {doc.get("name"): doc for doc in existing}
    actions = []
    for spec in specs:
        current = by_name.get(spec.name)
        if current is None:
            actions.append(Action("create", spec))
        elif not covers(current.get("latestDefinition"), spec.definition):
            actions.append(Action("update", spec))
        else:
            actions.append(Action("unchanged", spec))
    return actions


def covers(actual: Any, wanted: Any) -> bool:
    """Whether the server's definition holds every key and value ours sets. Keys the server
    adds (defaults such as an analyzer or `storedSource`) do not count as a change."""
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(
            key in actual and covers(actual[key], value) for key, value in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(wanted)
            and all(covers(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return actual == wanted


class SearchUnsupported(RuntimeError):
    """The server has no Atlas Search (SecantusDB, plain mongod without mongot)."""


async def apply(
    collection: AsyncCollection,
    specs: list[IndexSpec],
    *,
    wait: bool = True,
    timeout_s: float = 600,
    poll_s: float = 5,
    echo: Any = print,
) -> list[Action]:
    """Create/update as planned; with `wait`, return once every index is queryable."""
    try:
        cursor = await collection.list_search_indexes()
        existing = await cursor.to_list()
    except OperationFailure as exc:
        if exc.code in SEARCH_UNAVAILABLE_CODES:
            raise SearchUnsupported(
                f"this server does not support Atlas Search (code {exc.code}); Autonote uses "
                "its local search backend here, so there is nothing to create"
            ) from exc
        raise
    actions = plan(existing, specs)
    to_create = [a.spec for a in actions if a.kind == "create"]
    if to_create:
        await collection.create_search_indexes(
            [SearchIndexModel(definition=s.definition, name=s.name, type=s.type) for s in to_create]
        )
    for action in actions:
        if action.kind == "update":
            await collection.update_search_index(action.spec.name, action.spec.definition)
        echo(f"{action.spec.name}: {action.kind}")
    if wait:
        await wait_queryable(
            collection, [s.name for s in specs], timeout_s=timeout_s, poll_s=poll_s, echo=echo
        )
    return actions


async def wait_queryable(
    collection: AsyncCollection,
    names: list[str],
    *,
    timeout_s: float,
    poll_s: float,
    echo: Any = print,
) -> None:
    """Poll until every named index reports `queryable: true` (and status READY)."""
    deadline = time.monotonic() + timeout_s
    while True:
        cursor = await collection.list_search_indexes()
        docs = {d.get("name"): d for d in await cursor.to_list()}
        pending = [
            n
            for n in names
            if not docs.get(n, {}).get("queryable") or docs[n].get("status") not in (None, "READY")
        ]
        failed = [n for n in names if docs.get(n, {}).get("status") == "FAILED"]
        if failed:
            raise RuntimeError(f"search index build failed: {', '.join(failed)}")
        if not pending:
            echo("all search indexes are queryable")
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"not queryable after {timeout_s}s: {', '.join(pending)}")
        echo(f"waiting for: {', '.join(pending)}")
        await asyncio.sleep(poll_s)


async def backfill_note_times(db: AsyncDatabase, batch: int = 500) -> int:
    """Copy each note's `updated_at` onto its chunks written before chunks carried it, so
    the `updated_after` pre-filter sees them (a chunk whose note is gone gets None).
    Idempotent; the number of chunks updated."""
    chunks, notes = ChunksRepository(db), NotesRepository(db)
    updated = 0
    while note_ids := await chunks.notes_missing_updated_at(batch):
        times = await notes.updated_times(note_ids)
        for note_id in note_ids:
            updated += await chunks.fill_note_updated_at(note_id, times.get(note_id))
    return updated
