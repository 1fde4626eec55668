"""Running a migration (or its dry run) from validated options: connect, build the same
embedder/chunker/reconciler as the API, run, report. The CLI layer is `api.cli.migrate`.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import typer

from api.db.search import search_backend
from api.errors import StartupError
from api.indexing.runtime import blue_green_for, retention_for
from api.tasks import cancel_and_wait

if TYPE_CHECKING:
    from bson import ObjectId
    from pymongo.asynchronous.database import AsyncDatabase
    from rich.console import Console

    from api.config import Settings
    from api.migration.progress import ProgressReporter


DUPLICATE_CHUNKS_HINT = (
    "note_chunks already holds several chunks with the same (note_id, note_version, "
    "chunk_index), e.g. from an earlier migration script run twice, so the unique index "
    "that keeps the migration from duplicating chunks cannot be created. Nothing was "
    "changed. Inspect them and delete the duplicates, then run `autonote check --repair` "
    "(it re-queues every note whose chunks are now missing: the migration trusts each "
    "note's index fields and would not notice) and run the migration again."
)


class ProgressMode(StrEnum):
    """How progress is shown."""

    auto = "auto"  # bar when stdout is a terminal, log lines otherwise
    bar = "bar"
    log = "log"
    none = "none"


@dataclass(frozen=True, slots=True)
class MigrateOptions:
    """Everything `autonote migrate` accepts, validated."""

    dry_run: bool = False
    authors: tuple[ObjectId, ...] = ()
    limit: int | None = None
    since: datetime | None = None
    include_failed: bool = True
    concurrency: int = 4
    batch_size: int = 200
    rate_limit_tokens_per_min: int | None = None
    rate_limit_requests_per_min: int | None = None
    lease_s: float = 15.0
    progress: ProgressMode = ProgressMode.auto
    progress_interval_s: float = 5.0
    json_output: bool = False


@asynccontextmanager
async def connect(settings: Settings, *, read_only: bool) -> AsyncIterator[AsyncDatabase]:
    """The configured database (the embedded one when MONGODB_URL is unset: attached if a
    `make run` server is up, else started). A wrong URL or credentials fail within
    MONGODB_TIMEOUT_MS (not the client's 15 s operation timeout). `read_only` skips creating
    indexes: a dry run must not change the database, not even by creating collections."""
    import pymongo

    from api.db.client import ensure_indexes, open_database

    # must_exist: a mistyped AUTONOTE_DATA_DIR must not be migrated or checked as a new,
    # empty and healthy database.
    async with open_database(settings, must_exist=True) as (client, _):
        db = client[settings.mongodb_db]
        with pymongo.timeout(max(settings.mongodb_timeout_ms / 1000, 1.0)):
            await db.command("ping")
            # Likewise a mistyped MONGODB_DB, which would read as "0 notes, clean".
            if not await db.list_collection_names(filter={"name": "notes"}):
                raise FileNotFoundError(
                    f"database {settings.mongodb_db!r} has no notes collection: check "
                    "MONGODB_DB (a mistyped name reads as an empty database)"
                )
        if not read_only:
            await ensure_indexes(db, cache_ttl_days=settings.autonote_embedding_cache_days)
        yield db


def _reporter(options: MigrateOptions, console: Console, label: str) -> ProgressReporter:
    from api.migration.progress import BarProgress, LogProgress, NullProgress

    if options.progress is ProgressMode.bar:
        return BarProgress(console, label)
    if options.progress is ProgressMode.log:
        event = "migration.dry_run_progress" if options.dry_run else "migration.progress"
        return LogProgress(options.progress_interval_s, event=event)
    return NullProgress()


async def execute(settings: Settings, options: MigrateOptions, *, stdout: Any = None) -> int:
    """Run the migration (or the dry run) and print its result; returns the exit code."""
    from pymongo.errors import DuplicateKeyError, PyMongoError
    from rich.console import Console

    from api.providers import build_chunker, build_embedder, build_openai_client

    out = stdout or sys.stdout
    console = Console(file=out, soft_wrap=True)
    bar_console = Console(file=sys.stderr) if options.json_output else console
    if not settings.chunking_enabled:
        typer.echo("autonote migrate: chunking is disabled (CHUNKING_ENABLED=false)", err=True)
        return 2
    async with AsyncExitStack() as stack:
        openai_client = build_openai_client(settings)
        if openai_client is not None:
            stack.push_async_callback(openai_client.close)
        try:
            embedder = build_embedder(settings, openai_client)
        except ValueError as exc:
            typer.echo(f"autonote migrate: {exc}", err=True)
            return 2
        stack.push_async_callback(embedder.aclose)
        if options.rate_limit_tokens_per_min or options.rate_limit_requests_per_min:
            from api.migration.limiter import RateLimitedEmbedder

            embedder = RateLimitedEmbedder(
                embedder,
                tokens_per_period=options.rate_limit_tokens_per_min,
                requests_per_period=options.rate_limit_requests_per_min,
            )
        chunker = build_chunker(settings, embedder)
        try:
            db = await stack.enter_async_context(connect(settings, read_only=options.dry_run))
        except PyMongoError as exc:
            typer.echo(f"autonote migrate: cannot use the database: {exc}", err=True)
            if isinstance(exc, DuplicateKeyError):
                typer.echo(DUPLICATE_CHUNKS_HINT, err=True)
            return 2
        except FileNotFoundError as exc:  # no embedded database at AUTONOTE_DATA_DIR
            typer.echo(f"autonote migrate: {exc}", err=True)
            return 2
        selection = _selection(options, chunker, embedder)
        reporter = _reporter(options, bar_console, "Dry run" if options.dry_run else "Indexing")
        if options.dry_run:
            return await _dry_run(
                settings, db, selection, options, chunker, embedder, reporter, console
            )
        try:  # the same retention of replaced chunks as the API's workers
            backend = await search_backend(db, settings)
        except StartupError as exc:
            typer.echo(f"autonote migrate: {exc}", err=True)
            return 2
        return await _run(
            settings, db, selection, options, chunker, embedder, reporter, console, backend
        )
    return 1  # pragma: no cover - the stack never swallows


def _selection(options: MigrateOptions, chunker: Any, embedder: Any) -> Any:
    from api.migration.selection import Selection
    from api.providers import embedding_model_key

    return Selection(
        chunking_version=chunker.version,
        embedding_model=embedding_model_key(embedder),
        authors=options.authors,
        since=options.since,
        include_failed=options.include_failed,
        limit=options.limit,
    )


async def _dry_run(
    settings: Settings,
    db: AsyncDatabase,
    selection: Any,
    options: MigrateOptions,
    chunker: Any,
    embedder: Any,
    reporter: ProgressReporter,
    console: Console,
) -> int:
    from api.migration.estimate import estimate
    from api.migration.progress import render_estimate, stop_quietly
    from api.migration.repository import MigrationNotes, ReuseLookup

    notes = MigrationNotes(db)
    total = await notes.count(selection)
    reporter.start(total if options.limit is None else min(total, options.limit))
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        reporter.update(done)

    try:
        result = await estimate(
            notes,
            ReuseLookup(db),
            selection,
            chunker=chunker,
            tokenizer=embedder.tokenizer,
            provider=embedder.provider,
            model_name=embedder.model,
            batch_size=options.batch_size,
            on_progress=advance,
            max_attempts=settings.autonote_index_max_attempts,
        )
    finally:
        stop_quietly(reporter)
    if options.json_output:
        typer.echo(json.dumps(result.as_dict()), file=console.file)
    else:
        render_estimate(result, console)
    return 0


async def _run(
    settings: Settings,
    db: AsyncDatabase,
    selection: Any,
    options: MigrateOptions,
    chunker: Any,
    embedder: Any,
    reporter: ProgressReporter,
    console: Console,
    backend: str = "local",
) -> int:
    import structlog

    from api.indexing.runtime import build_indexing
    from api.migration.progress import render_summary, stop_quietly
    from api.migration.repository import MigrationNotes
    from api.migration.runner import MigrationRunner
    from api.migration.types import MigrationSummary

    log = structlog.get_logger("api.migration")
    # One code path with the API: the same reconciler, built the same way; only the lease
    # is shorter, so a killed run's notes come back quickly.
    run_settings = settings.model_copy(update={"autonote_index_lease_s": options.lease_s})
    indexing = build_indexing(
        run_settings,
        db,
        chunker=chunker,
        embedder=embedder,
        concurrency=options.concurrency,
        retain_s=retention_for(settings, backend),
        blue_green=blue_green_for(settings, backend),
    )
    # A new chunker or model: users keep reading their generation until it is complete.
    await indexing.switch.prepare()
    runner = MigrationRunner(
        indexing.reconciler,
        MigrationNotes(db),
        selection,
        batch_size=options.batch_size,
        concurrency=options.concurrency,
        on_start=reporter.start,
        on_update=lambda s: reporter.update(
            s.done, indexed=s.indexed, failed=s.failed, skipped=s.skipped
        ),
    )
    started = time.monotonic()
    task = asyncio.create_task(runner.run())
    loop = asyncio.get_running_loop()
    stopping: list[int] = []
    stoppers: list[asyncio.Task[None]] = []

    def interrupt(signum: int) -> None:
        # First signal: stop cleanly. Restoring the default handler makes a second Ctrl-C
        # end the process at once.
        stopping.append(signum)
        loop.remove_signal_handler(signum)
        task.cancel()
        # A note loop can lose its cancellation inside PyMongo (see cancel_and_wait) and
        # then wait forever for a batch that will never come: cancel them until they stop.
        stoppers.append(asyncio.create_task(cancel_and_wait([task, *runner.tasks])))

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, interrupt, sig)
    error: str | None = None
    try:
        await task
    except asyncio.CancelledError:
        if not stopping:
            raise
    except Exception as exc:
        error = _describe(exc)
        log.error("migration.error", error=error, exc_info=True)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await asyncio.gather(*stoppers, return_exceptions=True)
        stop_quietly(reporter)
    if stopping:
        # The interrupt may have cut the run's own release short: without this, the notes
        # it reserved would wait for the reservations to run out before workers take them.
        try:
            await runner.end_reservations()
        except Exception as exc:
            log.warning("migration.reservations_not_ended", error=_describe(exc))
    summary = MigrationSummary(
        runner.stats, time.monotonic() - started, interrupted=bool(stopping), error=error
    )
    fields = {k: v for k, v in summary.as_dict().items() if k not in ("failures", "dry_run")}
    log.info("migration.finished", **fields)
    if options.json_output:
        typer.echo(json.dumps(summary.as_dict()), file=console.file)
    else:
        render_summary(summary, console)
    return summary.exit_code


def _describe(exc: BaseException) -> str:
    """The first real error inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:500]
