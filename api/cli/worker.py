"""`autonote worker`: indexing loops without HTTP."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from api.cli.common import database, run_or_exit, settings_or_exit
from api.cli.index import YesOption, reindex_gate
from api.config import Settings
from api.db.search import search_backend


def worker(
    concurrency: Annotated[
        int, typer.Option(min=1, max=64, help="Indexing loops in this process")
    ] = 2,
    yes: YesOption = False,
) -> None:
    """Run indexing workers only (no HTTP). Start as many processes as you like: they
    share the queue through leases. Uses the same settings as `serve`. When the chunker or
    embedding model changed, it says what re-indexing will cost and asks first on a
    terminal; without one it refuses to start unless --yes."""
    settings = settings_or_exit()
    if not settings.chunking_enabled:
        # The API leaves notes `disabled` then; a worker must not index them behind its back.
        typer.echo("autonote worker: chunking is disabled (CHUNKING_ENABLED=false)", err=True)
        raise typer.Exit(2)
    run_or_exit(_run_worker(settings, concurrency, assume_yes=yes))


async def _run_worker(settings: Settings, concurrency: int, *, assume_yes: bool) -> None:
    import signal

    import structlog

    from api.indexing.runtime import blue_green_for, build_indexing, retention_for
    from api.providers import build_chunker, build_embedder, build_openai_client

    log = structlog.get_logger("autonote.worker")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with database(settings) as db:
        openai_client = build_openai_client(settings)
        embedder = build_embedder(settings, openai_client)
        try:
            chunker = build_chunker(settings, embedder)
            backend = await search_backend(db, settings)
            indexing = build_indexing(
                settings,
                db,
                chunker=chunker,
                embedder=embedder,
                concurrency=concurrency,
                retain_s=retention_for(settings, backend),
                blue_green=blue_green_for(settings, backend),
            )
            # Who reads which generation, before any run (the cost of a new one logged, and
            # confirmed unless --yes).
            await indexing.switch.prepare(reindex_gate("worker", assume_yes=assume_yes))
            await indexing.workers.start()
            log.info("worker.ready", concurrency=concurrency)
            await stop.wait()
            await indexing.workers.stop()
        finally:
            await embedder.aclose()
            if openai_client is not None:
                await openai_client.close()
