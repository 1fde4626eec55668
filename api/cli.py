"""`autonote` — every operational command in one CLI (`autonote --help`)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from api.config import Settings, SettingsError, load_settings

app = typer.Typer(
    name="autonote",
    help="Autonote: markdown notes with heading-aware chunks, hybrid search and cited chat.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
)
users_app = typer.Typer(help="Manage users and API keys.", no_args_is_help=True)
app.add_typer(users_app, name="users")
indexes_app = typer.Typer(help="Manage the Atlas Search indexes.", no_args_is_help=True)
app.add_typer(indexes_app, name="indexes")
eval_app = typer.Typer(
    help="Measure retrieval quality (Recall@k, MRR) on a labelled dataset.", no_args_is_help=True
)
app.add_typer(eval_app, name="eval")


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


@app.command("serve")
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (AUTONOTE_HOST)")] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="Port (AUTONOTE_PORT)")] = None,
) -> None:
    """Serve the REST API. With no MONGODB_URL it starts the embedded database in
    AUTONOTE_DATA_DIR; with no OPENAI_API_KEY it embeds with the local ONNX model."""
    import os

    import structlog
    import uvicorn

    # The app loads its settings itself: the flags reach it (and its messages) as the
    # variables they stand for, validated like them.
    if host is not None:
        os.environ["AUTONOTE_HOST"] = host
    if port is not None:
        os.environ["AUTONOTE_PORT"] = str(port)
    settings = settings_or_exit()
    if settings.autonote_metrics_token is None and not _loopback(settings.autonote_host):
        structlog.get_logger("autonote.serve").warning(
            "metrics.unprotected",
            host=settings.autonote_host,
            detail="/metrics is readable by anyone who reaches the port; its counters show "
            "other users' activity: set AUTONOTE_METRICS_TOKEN",
        )
    uvicorn.run(
        "api.app:create_app",
        factory=True,
        log_config=None,
        host=settings.autonote_host,
        port=settings.autonote_port,
        proxy_headers=bool(settings.autonote_trusted_proxies),
        forwarded_allow_ips=settings.autonote_trusted_proxies or None,
        timeout_graceful_shutdown=20,
    )


def _loopback(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


@app.command("setup-offline")
def setup_offline() -> None:
    """Seed tiktoken's cache from the installed package so nothing downloads at run time."""
    from connectors.offline import seed_tiktoken_cache

    path = seed_tiktoken_cache()
    typer.echo(f"tiktoken vocabularies ready in {path}")


@app.command("worker")
def worker(
    concurrency: Annotated[
        int, typer.Option(min=1, max=64, help="Indexing loops in this process")
    ] = 2,
) -> None:
    """Run indexing workers only (no HTTP). Start as many processes as you like: they
    share the queue through leases. Uses the same settings as `serve`."""
    settings = settings_or_exit()
    if not settings.chunking_enabled:
        # The API leaves notes `disabled` then; a worker must not index them behind its back.
        typer.echo("autonote worker: chunking is disabled (CHUNKING_ENABLED=false)", err=True)
        raise typer.Exit(2)
    run_or_exit(_run_worker(settings, concurrency))


async def _run_worker(settings: Settings, concurrency: int) -> None:
    import signal

    import structlog

    from api.indexing.runtime import build_indexing
    from api.providers import build_chunker, build_embedder, build_openai_client

    log = structlog.get_logger("autonote.worker")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with database(settings) as db:
        openai_client = build_openai_client(settings)
        embedder = build_embedder(settings, openai_client)
        chunker = build_chunker(settings, embedder)
        indexing = build_indexing(
            settings, db, chunker=chunker, embedder=embedder, concurrency=concurrency
        )
        await indexing.workers.start()
        log.info("worker.ready", concurrency=concurrency)
        await stop.wait()
        await indexing.workers.stop()
        await embedder.aclose()
        if openai_client is not None:
            await openai_client.close()


@indexes_app.command("create")
def indexes_create(
    wait: Annotated[bool, typer.Option(help="Wait until the indexes are queryable")] = True,
    timeout: Annotated[float, typer.Option(min=1, help="Seconds to wait")] = 600,
) -> None:
    """Create or update the Atlas Vector Search and Atlas Search indexes on note_chunks
    (definitions in atlas_indexes/, numDimensions from the configured embedding model)."""
    from scripts.create_indexes import run

    raise typer.Exit(run_or_exit(run(wait=wait, timeout_s=timeout)))


@app.command("import")
def import_files(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (e.g. an Obsidian vault)")],
    url: Annotated[
        str | None,
        typer.Option(help="Autonote server (default: AUTONOTE_HOST and AUTONOTE_PORT)"),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="AUTONOTE_API_KEY", help="API key (default: AUTONOTE_DATA_DIR/api_key)"
        ),
    ] = None,
    tag: Annotated[list[str] | None, typer.Option(help="Tag added to every imported note")] = None,
    batch: Annotated[int, typer.Option(min=1, max=200, help="Files per request")] = 20,
) -> None:
    """Import .md/.txt/.html/.docx/.pdf files (folders recursively; hidden folders such as
    .obsidian are skipped) into a running server as notes of the key's user. Prints one line
    per file; exits 1 if any file failed."""
    import httpx

    settings = settings_or_exit()
    from api.importing import iter_import_paths, upload_name
    from api.importing.upload import import_batches, post_import, shown_path, unsendable

    key = api_key
    key_file = settings.autonote_data_dir / "api_key"
    if key is None and key_file.exists():
        key = key_file.read_text().strip()
    if not key:
        typer.echo("autonote: no API key (pass --api-key or set AUTONOTE_API_KEY)", err=True)
        raise typer.Exit(2)
    skipped: list[tuple[Path, str]] = []
    try:
        files = list(iter_import_paths(paths, on_skip=lambda p, code: skipped.append((p, code))))
    except FileNotFoundError as exc:
        typer.echo(f"autonote: {exc}", err=True)
        raise typer.Exit(2) from None
    failed = sum(code == "unreadable" for _, code in skipped)  # a folder we could not list
    for path, code in skipped:
        typer.echo(f"skipped      {shown_path(path)} ({code.replace('_', ' ')})")
    imported = 0
    headers = {"Authorization": f"Bearer {key}"}
    url = url or settings.base_url
    with httpx.Client(base_url=url, headers=headers, timeout=300) as client:
        pending = import_batches(files, batch, settings.autonote_max_import_bytes)
        while pending:
            group = pending.pop(0)
            upload, sent = [], []
            for path in group:
                name = upload_name(path, paths)
                problem = unsendable(path, name, settings)
                if problem is not None:
                    failed += 1
                    typer.echo(f"failed       {shown_path(path)}: {problem}")
                    continue
                try:
                    upload.append(("files", (name, path.read_bytes())))
                    sent.append(path)
                except OSError as exc:
                    failed += 1
                    why = f"unreadable: {exc.strerror or exc}"
                    typer.echo(f"failed       {shown_path(path)}: {why}")
            if not upload:
                continue
            data = {"tags": tag} if tag else None
            # Each file may take the server's conversion budget: a fixed 300 s gave up on a
            # batch of big HTML files the server was still converting, and a rerun made
            # their notes again (found by review).
            timeout = httpx.Timeout(30, read=len(upload) * settings.autonote_import_timeout_s + 60)
            try:
                resp = post_import(client, upload, data, timeout)
            except httpx.HTTPError as exc:
                typer.echo(f"autonote: cannot reach {url}: {exc}", err=True)
                raise typer.Exit(2) from None
            if resp.status_code in (401, 403):  # no point in sending the rest
                typer.echo(f"autonote: server answered {resp.status_code}: {resp.text}", err=True)
                raise typer.Exit(2)
            if resp.status_code == 413 and len(sent) > 1:
                # The server's request limit is lower than ours: send halves.
                half = len(sent) // 2
                pending[:0] = [sent[:half], sent[half:]]
                continue
            if resp.status_code != 200:  # this batch only; the others go on
                for path in sent:
                    failed += 1
                    answer = f"HTTP {resp.status_code}: {resp.text[:200]}"
                    typer.echo(f"failed       {shown_path(path)}: {answer}")
                continue
            body = resp.json()
            for item in body["imported"]:
                imported += 1
                typer.echo(
                    f"imported     {item['filename']} -> {item['note']['id']} "
                    f"{item['note']['title']!r}"
                )
                for warning in item.get("warnings") or []:
                    typer.echo(f"  warning    {warning}")
            for item in body["errors"]:
                failed += 1
                typer.echo(f"failed       {item['filename']}: {item['error']}: {item['detail']}")
    typer.echo(f"{imported} imported, {failed} failed, {len(skipped)} skipped")
    raise typer.Exit(1 if failed else 0)


@users_app.command("create")
def users_create(name: Annotated[str, typer.Argument(help="Display name of the user")]) -> None:
    """Create a user directly in the database and print its API key (shown once)."""
    from api.users.models import clean_user_name
    from api.users.repository import UsersRepository
    from api.users.service import UsersService

    try:
        name = clean_user_name(name)
    except ValueError as exc:
        typer.echo(f"autonote: {exc}", err=True)
        raise typer.Exit(2) from None
    settings = settings_or_exit()

    async def run() -> None:
        async with database(settings) as db:
            service = UsersService(UsersRepository(db), admin_token=None, rate_per_minute=0)
            created = await service.create_user(name)
            # stdout is the key alone (`KEY=$(autonote users create bob)` caught both
            # lines; found by review); who it belongs to goes to stderr.
            typer.echo(f"user {created.user_id} ({name})", err=True)
            typer.echo(created.api_key)

    run_or_exit(run())


def run_or_exit(main: Any) -> Any:
    """`asyncio.run(main)`, with an unreachable or failing database as one line on stderr and
    exit 2 (users create, worker and indexes create printed a 277-line traceback; found by
    review), as `check` and `migrate` already did."""
    from pymongo.errors import PyMongoError

    try:
        return asyncio.run(main)
    except PyMongoError as exc:
        typer.echo(f"autonote: cannot use the database: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(2) from None
    except FileNotFoundError as exc:  # no embedded database where AUTONOTE_DATA_DIR points
        typer.echo(f"autonote: {exc}", err=True)
        raise typer.Exit(2) from None


def database(settings: Settings):
    """Connect (starting/attaching the embedded server if MONGODB_URL is unset)."""
    from contextlib import asynccontextmanager

    from api.db.client import ensure_indexes, open_database

    @asynccontextmanager
    async def ctx():
        async with open_database(settings) as (client, _):
            db = client[settings.mongodb_db]
            await ensure_indexes(db, cache_ttl_days=settings.autonote_embedding_cache_days)
            yield db

    return ctx()


# --- migrate command (owned by the migration module) ---
from api.migration.command import migrate as _migrate  # noqa: E402

app.command("migrate")(_migrate)


# --- check command (owned by api.integrity) ---
from api.integrity.command import check as _check  # noqa: E402

app.command("check")(_check)


# --- eval commands (scripts.evaluate_retrieval, scripts.optimize_chunk_size) ---
from scripts.evaluate_retrieval import evaluate_command as _evaluate  # noqa: E402
from scripts.optimize_chunk_size import optimize_command as _optimize  # noqa: E402

eval_app.command("run")(_evaluate)
eval_app.command("optimize-chunk-size")(_optimize)


def main() -> None:  # pragma: no cover
    app(prog_name="autonote")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
