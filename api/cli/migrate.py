"""`autonote migrate` / `python -m scripts.migrate_notes_to_chunks`: backfill chunks and
embeddings for existing notes through the API's own reconciler.

Heavy imports are deferred to the command body so `autonote --help` stays fast, and
`api.cli` is only imported there (api.cli imports this module to register the command).
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from api.migration.execute import MigrateOptions, ProgressMode, execute

if TYPE_CHECKING:
    from bson import ObjectId


def parse_since(value: str) -> datetime:
    """ISO 8601 date or date-time (`2024-05-01`, `2024-05-01T12:00:00+02:00`); naive = UTC."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(
            f"{value!r} is not an ISO 8601 date, e.g. 2024-05-01 or 2024-05-01T12:00:00Z"
        ) from None
    parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    try:
        # An offset can push a date past what a datetime (and a BSON date) holds
        # (`0001-01-01T00:00+05:00`): refused here, not at the database.
        return parsed.astimezone(UTC)
    except OverflowError:
        raise typer.BadParameter(
            f"{value!r} is outside the dates that can be stored (years 1 to 9999 in UTC)"
        ) from None


def parse_authors(values: list[str] | None) -> tuple[ObjectId, ...]:
    """`--user` values as ObjectIds (24 hex digits each)."""
    from bson import ObjectId
    from bson.errors import InvalidId

    out = []
    for value in values or []:
        try:
            out.append(ObjectId(value))
        except (InvalidId, TypeError):
            raise typer.BadParameter(
                f"{value!r} is not a user id (24 hexadecimal characters)", param_hint="--user"
            ) from None
    return tuple(out)


def migrate(
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Change nothing: print how many notes, chunks and tokens would be indexed "
            "and the estimated embedding cost.",
        ),
    ] = False,
    user: Annotated[
        list[str] | None,
        typer.Option("--user", metavar="AUTHOR_ID", help="Only this author's notes (repeatable)."),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="At most N notes this run.")] = None,
    since: Annotated[
        datetime | None,
        typer.Option(
            parser=parse_since, metavar="DATE", help="Only notes created at or after DATE."
        ),
    ] = None,
    include_failed: Annotated[
        bool,
        typer.Option(
            "--include-failed/--no-include-failed",
            help="Retry notes whose indexing failed (with a fresh attempt budget).",
        ),
    ] = True,
    concurrency: Annotated[
        int, typer.Option(min=1, max=64, help="Notes indexed at the same time.")
    ] = 4,
    batch_size: Annotated[
        int, typer.Option(min=1, max=10_000, help="Notes enqueued at a time.")
    ] = 200,
    rate_limit_tokens_per_min: Annotated[
        int | None, typer.Option(min=1, help="Embedding tokens per minute (default: no limit).")
    ] = None,
    rate_limit_requests_per_min: Annotated[
        int | None,
        typer.Option(min=1, help="Embedding requests per minute (default: no limit)."),
    ] = None,
    lease_s: Annotated[
        float,
        typer.Option(
            min=1,
            max=3600,
            help="Lease per claimed note; a killed run's notes are "
            "claimable again after this many seconds (live leases are extended).",
        ),
    ] = 15.0,
    progress: Annotated[
        ProgressMode,
        typer.Option(help="auto: a bar on a terminal, migration.progress log lines otherwise."),
    ] = ProgressMode.auto,
    progress_interval: Annotated[
        float, typer.Option(min=0.1, help="Seconds between progress log lines.")
    ] = 5.0,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the result as one JSON object on stdout.")
    ] = False,
) -> None:
    """Index existing notes (chunks + embeddings) through the API's reconciler.

    Selects active notes not indexed at their current version with the
    configured chunker and embedding model: legacy notes without index
    fields, notes never indexed, a stale chunker or model, failed notes.

    Safe to interrupt (Ctrl-C or kill) and run again: it resumes, never
    duplicates chunks and never loses an edit made meanwhile.

    Exit code: 0 all indexed, 1 a note failed, 2 bad arguments or
    configuration, 130 interrupted.

    Examples: `autonote migrate --dry-run`;
    `autonote migrate --concurrency 8 --rate-limit-tokens-per-min 900000`;
    `MONGODB_URL='mongodb+srv://...' autonote migrate --since 2024-01-01`.
    """
    from api.cli.common import settings_or_exit
    from api.logging import configure_logging

    options = MigrateOptions(
        dry_run=dry_run,
        authors=parse_authors(user),
        limit=limit,
        since=since,
        include_failed=include_failed,
        concurrency=concurrency,
        batch_size=batch_size,
        rate_limit_tokens_per_min=rate_limit_tokens_per_min,
        rate_limit_requests_per_min=rate_limit_requests_per_min,
        lease_s=lease_s,
        progress=resolve_progress(progress, json_output),
        progress_interval_s=progress_interval,
        json_output=json_output,
    )
    settings = settings_or_exit()
    level = settings.log_level
    if options.progress is ProgressMode.bar and level in ("DEBUG", "INFO"):
        level = "WARNING"  # one line per note would scroll the bar away
    configure_logging(level, settings.log_json)
    try:
        code = asyncio.run(execute(settings, options))
    except KeyboardInterrupt:  # a second Ctrl-C, or one during the dry run
        code = 130
    raise typer.Exit(code)


def resolve_progress(mode: ProgressMode, json_output: bool) -> ProgressMode:
    """`auto` → a bar when stdout is a terminal (and not reserved for --json), else logs."""
    if mode is not ProgressMode.auto:
        return mode
    return ProgressMode.bar if sys.stdout.isatty() and not json_output else ProgressMode.log
