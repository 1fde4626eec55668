"""`autonote indexes create` (also `python -m scripts.create_indexes`)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from api.cli.common import database, run_or_exit, settings_or_exit
from api.retrieval.atlas_indexes import SearchUnsupported, apply, backfill_note_times, load_specs


def indexes_create(
    wait: Annotated[bool, typer.Option(help="Wait until the indexes are queryable")] = True,
    timeout: Annotated[float, typer.Option(min=1, help="Seconds to wait")] = 600,
) -> None:
    """Create or update the Atlas Vector Search and Atlas Search indexes on note_chunks
    (definitions in atlas_indexes/, numDimensions from the configured embedding model)."""
    raise typer.Exit(run_or_exit(run(wait=wait, timeout_s=timeout)))


async def run(wait: bool = True, timeout_s: float = 600) -> int:
    """Create or update the indexes; the exit code (2 on a server without Atlas Search)."""
    from api.providers import build_embedder, build_openai_client

    settings = settings_or_exit()
    embedder = build_embedder(settings, build_openai_client(settings))
    specs = load_specs(
        embedder.dimensions,
        vector_name=settings.atlas_vector_index,
        text_name=settings.atlas_text_index,
    )
    async with database(settings) as db:
        try:
            await apply(db.note_chunks, specs, wait=wait, timeout_s=timeout_s)
        except SearchUnsupported as exc:
            print(f"autonote: {exc}", file=sys.stderr)
            return 2
        filled = await backfill_note_times(db)
        if filled:
            print(f"note_updated_at copied onto {filled} older chunks")
    return 0
