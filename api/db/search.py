"""Choosing the search backend at start-up (SEARCH_BACKEND), loudly.

`auto` falls back to the in-process index only when the server answers that it has no
search (`SEARCH_UNAVAILABLE_CODES`); any other answer (a permission error, a typo in the
database name) stops start-up. `atlas` requires both configured indexes to exist and be
queryable. Every refusal is a `StartupError` whose message names the fix
(tests/db/test_search.py).
"""

from __future__ import annotations

from typing import Any, Literal

import structlog
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import OperationFailure

from api.config import Settings
from api.errors import StartupError

log = structlog.get_logger(__name__)

BackendName = Literal["atlas", "local"]
# Server error codes meaning "this deployment has no search" (by server version).
SEARCH_UNAVAILABLE_CODES = frozenset({31082, 115, 6047401, 59, 40324})


async def choose_backend(
    db: AsyncDatabase, setting: str, *, vector_index: str, text_index: str
) -> BackendName:
    """The backend SEARCH_BACKEND (`setting`) resolves to on this server, checked."""
    if setting == "local":
        return "local"
    try:
        indexes = await search_indexes(db)
    except OperationFailure as exc:
        if exc.code in SEARCH_UNAVAILABLE_CODES and setting == "auto":
            log.info("search.not_enabled", code=exc.code)
            return "local"
        raise StartupError(_refusal(setting, exc)) from None
    check_indexes(indexes, vector_index=vector_index, text_index=text_index)
    log.info("search.atlas_ready", indexes=sorted(indexes))
    return "atlas"


async def search_backend(db: AsyncDatabase, settings: Settings) -> BackendName:
    """`choose_backend` with the configured setting and index names."""
    return await choose_backend(
        db,
        settings.search_backend,
        vector_index=settings.atlas_vector_index,
        text_index=settings.atlas_text_index,
    )


async def search_indexes(db: AsyncDatabase) -> dict[str, dict[str, Any]]:
    """The search indexes of `note_chunks` by name, as `$listSearchIndexes` reports them."""
    cursor = await db.note_chunks.list_search_indexes()
    return {doc.get("name"): doc async for doc in cursor}


def check_indexes(
    indexes: dict[str, dict[str, Any]], *, vector_index: str, text_index: str
) -> None:
    """StartupError unless both indexes exist and are queryable."""
    for setting, name in (("ATLAS_VECTOR_INDEX", vector_index), ("ATLAS_TEXT_INDEX", text_index)):
        doc = indexes.get(name)
        if doc is None:
            raise StartupError(
                f"the Atlas Search index {name!r} ({setting}) does not exist on note_chunks: "
                "create it with `autonote indexes create`, or set "
                f"{setting} to the name of an existing one"
            )
        if not doc.get("queryable"):
            raise StartupError(
                f"the Atlas Search index {name!r} ({setting}) is not queryable yet "
                f"(status {doc.get('status', 'unknown')}): `autonote indexes create` waits "
                "until it is"
            )


def _refusal(setting: str, exc: OperationFailure) -> str:
    details = exc.details or {}
    message = str(details.get("errmsg") or exc).split(". ")[0][:160]
    name = details.get("codeName", "")
    why = f"code {exc.code}{f' {name}' if name else ''}: {message}"
    if exc.code in SEARCH_UNAVAILABLE_CODES:
        return (
            f"SEARCH_BACKEND={setting}, but this server has no Atlas Search ({why}); use "
            "SEARCH_BACKEND=auto or local for the in-process index"
        )
    return (
        f"SEARCH_BACKEND={setting}: the server refused to list the search indexes of "
        f"note_chunks ({why}); fix the server or the database user's role, or set "
        "SEARCH_BACKEND=local to use the in-process index"
    )
