"""What every `autonote` command shares: settings, the database, running a coroutine."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import typer
from pymongo.asynchronous.database import AsyncDatabase

from api.config import Settings, SettingsError, load_settings
from api.errors import StartupError


def settings_or_exit() -> Settings:
    """Load settings; on an invalid value print which variable is wrong and exit 2. Logs
    then go to stderr as configured, never to stdout, which carries the commands' output
    (`KEY=$(autonote users create bob)`, `autonote check --json`)."""
    from api.logging import configure_logging

    try:
        settings = load_settings()
    except SettingsError as exc:
        typer.echo(f"autonote: {exc}", err=True)
        raise typer.Exit(2) from None
    configure_logging(settings.log_level, settings.log_json)
    return settings


def run_or_exit(main: Coroutine[Any, Any, Any]) -> Any:
    """`asyncio.run(main)`; an unreachable or failing database is one line on stderr and
    exit 2, never a traceback (tests/test_cli.py)."""
    from pymongo.errors import PyMongoError

    try:
        return asyncio.run(main)
    except PyMongoError as exc:
        typer.echo(f"autonote: cannot use the database: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(2) from None
    except (FileNotFoundError, StartupError) as exc:  # e.g. no embedded database there
        typer.echo(f"autonote: {exc}", err=True)
        raise typer.Exit(2) from None


@asynccontextmanager
async def database(settings: Settings) -> AsyncIterator[AsyncDatabase]:
    """Connect (starting or attaching the embedded server if MONGODB_URL is unset)."""
    from api.db.client import ensure_indexes, open_database

    async with open_database(settings) as (client, _):
        db = client[settings.mongodb_db]
        await ensure_indexes(db, cache_ttl_days=settings.autonote_embedding_cache_days)
        yield db
