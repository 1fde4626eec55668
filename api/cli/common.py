"""What every `autonote` command shares: settings, the database, running a coroutine."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from pymongo.asynchronous.database import AsyncDatabase

from api.config import Settings, SettingsError, load_settings
from api.errors import DomainError, StartupError

# Options of the commands that talk to a running server.
UrlOption = Annotated[
    str | None, typer.Option(help="Autonote server (default: AUTONOTE_HOST and AUTONOTE_PORT)")
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(envvar="AUTONOTE_API_KEY", help="API key (default: AUTONOTE_DATA_DIR/api_key)"),
]
RootOption = Annotated[
    Path | None,
    typer.Option(
        help="Key files by their path from this folder (default: the nearest folder holding "
        ".obsidian/ or .autonote-root, else the folder given)",
        file_okay=False,
    ),
]
TagOption = Annotated[list[str] | None, typer.Option(help="Tag added to every imported note")]


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
    # e.g. no embedded database there, or a user name that is taken
    except (FileNotFoundError, StartupError, DomainError) as exc:
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


def api_key_or_exit(given: str | None, settings: Settings) -> str:
    """The key given, else the one `autonote serve` wrote to the data dir; exit 2 if none."""
    key = given
    key_file = settings.autonote_data_dir / "api_key"
    if key is None and key_file.exists():
        key = key_file.read_text().strip()
    if not key:
        typer.echo("autonote: no API key (pass --api-key or set AUTONOTE_API_KEY)", err=True)
        raise typer.Exit(2)
    return key


def files_or_exit(paths: list[Path]) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The supported files under `paths` (`iter_import_paths`), and the paths skipped with
    why (each printed); exit 2 when an argument does not exist."""
    from api.importing import iter_import_paths
    from api.importing.upload import shown_path

    skipped: list[tuple[Path, str]] = []
    try:
        files = list(iter_import_paths(paths, on_skip=lambda p, code: skipped.append((p, code))))
    except FileNotFoundError as exc:
        typer.echo(f"autonote: {exc}", err=True)
        raise typer.Exit(2) from None
    for path, code in skipped:
        typer.echo(f"skipped      {shown_path(path)} ({code.replace('_', ' ')})")
    return files, skipped


def http_client(url: str, key: str) -> Any:
    """An httpx client for the server at `url` with the API key."""
    import httpx

    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=300)
