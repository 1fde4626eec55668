"""`autonote check`: the integrity checker from the command line.

Heavy imports wait for the command body so `autonote --help` stays fast; `api.cli` is only
imported there (it imports this module to register the command).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from api.config import Settings
    from api.integrity.rules import Expectations


def expectations(settings: Settings) -> Expectations:
    """What every indexed note must look like under this configuration (the embedder is
    built the way the API builds it, but never called: nothing is loaded or sent)."""
    from api.integrity.rules import Expectations
    from api.providers import build_embedder, build_openai_client, embedding_model_key

    client = build_openai_client(settings)
    embedder = build_embedder(settings, client)
    return Expectations(
        model_key=embedding_model_key(embedder),
        dimensions=embedder.dimensions,
        chunking_enabled=settings.chunking_enabled,
    )


async def run_check(
    settings: Settings,
    *,
    repair: bool,
    retry_failed: bool,
    json_output: bool,
    examples: int,
    out: Any = None,
) -> int:
    """Connect, check, optionally repair, print; returns the exit code (0 clean, 1
    violations found, 2 cannot connect or bad configuration)."""
    from pymongo.errors import PyMongoError
    from rich.console import Console

    from api.integrity.checker import IntegrityChecker
    from api.integrity.report import render
    from api.migration.execute import connect

    out = out or sys.stdout
    try:
        expect = expectations(settings)
    except (ValueError, FileNotFoundError) as exc:
        typer.echo(f"autonote check: {exc}", err=True)
        return 2
    try:
        # read_only: never create indexes here (a missing unique index with duplicates
        # behind it is one of the things this command reports).
        async with connect(settings, read_only=True) as db:
            checker = IntegrityChecker(db, expect)
            report = await checker.run()
            if repair and report.findings:
                await checker.repair(report, retry_failed=retry_failed)
    except PyMongoError as exc:
        typer.echo(f"autonote check: database error: {type(exc).__name__}: {exc}", err=True)
        return 2
    except FileNotFoundError as exc:  # no embedded database where AUTONOTE_DATA_DIR points
        typer.echo(f"autonote check: {exc}", err=True)
        return 2
    if json_output:
        out.write(json.dumps(report.to_dict(examples), default=str) + "\n")
    else:
        render(report, Console(file=out, soft_wrap=True, width=160), examples)
    return 0 if report.ok else 1


def check(
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Re-queue affected notes (pending, fresh attempts) and delete orphan and "
            "corrupt chunks. Never changes a note's content.",
        ),
    ] = False,
    retry_failed: Annotated[
        bool,
        typer.Option("--retry-failed", help="With --repair: also re-queue `failed` notes."),
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the result as one JSON object on stdout.")
    ] = False,
    examples: Annotated[
        int, typer.Option(min=0, max=100, help="Examples shown per kind of problem.")
    ] = 3,
) -> None:
    """Check that the chunk index agrees with the notes (read-only unless --repair).

    Every active note indexed at its latest version or queued; chunk counts; no orphan or
    duplicate chunks; vectors of the configured model and dimensions; chunk offsets and
    text inside their note; chunk author equals note author. Streams both collections, so
    it runs on a live database of any size.

    Exit code: 0 clean (failed notes are listed but do not count), 1 violations found,
    2 bad configuration or database unreachable.
    """
    from api.cli.common import settings_or_exit
    from api.logging import configure_logging

    settings = settings_or_exit()
    configure_logging(
        "WARNING" if settings.log_level == "INFO" else settings.log_level, settings.log_json
    )
    code = asyncio.run(
        run_check(
            settings,
            repair=repair,
            retry_failed=retry_failed,
            json_output=json_output,
            examples=examples,
        )
    )
    raise typer.Exit(code)
