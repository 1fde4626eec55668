"""`autonote index status`, and the confirmation `serve` and `worker` ask for before they
start re-indexing every note into a new chunker or embedding model (`reindex_gate`).

Heavy imports wait for the command body so `autonote --help` stays fast.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.cli.common import database, run_or_exit, settings_or_exit

if TYPE_CHECKING:
    from pymongo.asynchronous.database import AsyncDatabase

    from api.config import Settings
    from api.indexing.switch import GenerationSwitch, ReindexGate
    from api.indexing.switch_estimate import ChangeEstimate


# `serve` and `worker`: start re-indexing into a changed chunker or model without asking.
YesOption = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help="Start re-indexing into a changed chunker or embedding model without asking",
    ),
]


def _switch(settings: Settings, db: AsyncDatabase) -> GenerationSwitch:
    """The generation switch of this configuration (the embedder is built the way the API
    builds it, but never called)."""
    from api.indexing.runtime import build_switch
    from api.providers import build_chunker, build_embedder, build_openai_client

    embedder = build_embedder(settings, build_openai_client(settings))
    return build_switch(settings, db, chunker=build_chunker(settings, embedder), embedder=embedder)


async def _status(settings: Settings, user: str | None) -> dict[str, Any]:
    from bson import ObjectId
    from bson.errors import InvalidId

    try:
        author = ObjectId(user) if user else None
    except InvalidId:
        typer.echo(f"autonote index status: --user {user!r} is not a user id", err=True)
        raise typer.Exit(2) from None
    async with database(settings) as db:
        switch = _switch(settings, db)
        status = await switch.status(author)
        if author is None:
            status["users"] = [
                {"user_id": str(author_id), "reads": generation}
                for author_id, generation in (await switch.load()).items()
            ]
        return status


def index_status(
    user: Annotated[
        str | None, typer.Option(help="One user's progress (their id); everyone's if omitted")
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """How far re-indexing into the configured chunker and embedding model is: notes done
    and left, tokens embedded, estimated tokens, cost and time left, and which users'
    search still reads their previous index."""
    settings = settings_or_exit()
    status = run_or_exit(_status(settings, user))
    if json_output:
        typer.echo(json.dumps(status, default=str))
        return
    typer.echo(render_status(status))


def render_status(status: dict[str, Any]) -> str:
    """A few lines for a person."""
    notes = status["notes"]
    configured = status["configured"]
    lines = [
        f"Configured: {configured['embedding_model']} (generation {configured['generation']})",
        f"Notes: {notes['done']} of {notes['total']} done, {notes['left']} left "
        f"({notes['queued']} queued, {notes['failed']} failed); chunks: {status['chunks_done']}",
        f"Tokens embedded: {status['tokens_embedded']:,}; estimated left: "
        f"{status['estimated_tokens_left']:,}",
    ]
    cost, left = status["cost_so_far_usd"], status["estimated_cost_left_usd"]
    if cost is not None:
        lines.append(f"Cost so far: ${cost:,.4f}; estimated left: ${left or 0:,.4f}")
    seconds = status["estimated_seconds_left"]
    if status["switching"]:
        eta = "unknown" if seconds is None else f"{seconds:,.0f} s"
        lines.append(f"Switching: yes; estimated time left: {eta}")
        serving = status.get("serving")
        if serving:
            lines.append(f"Search reads: {serving['embedding_model']} until the switch")
        for entry in status.get("users", []):
            lines.append(f"  user {entry['user_id']} reads generation {entry['reads']}")
    else:
        lines.append("Switching: no (search reads the configured generation)")
    if notes["failed"]:
        lines.append(
            "Failed notes hold their user's switch: re-queue them with "
            "`autonote check --repair --retry-failed` or POST /v1/notes/{id}/reindex."
        )
    return "\n".join(lines)


def reindex_gate(
    command: str,
    *,
    assume_yes: bool,
    interactive: bool | None = None,
    ask: Callable[[str], bool] | None = None,
) -> ReindexGate:
    """What `serve` and `worker` do when their start-up would re-index notes into a changed
    chunker or model: with `assume_yes`, go on (the cost is logged); on a terminal, print
    the estimate and ask; without one, refuse in one line naming --yes (nobody confirmed
    the cost)."""

    async def gate(estimate: ChangeEstimate) -> None:
        import asyncio

        from api.errors import StartupError

        if assume_yes:
            return
        tty = interactive
        if tty is None:
            tty = sys.stdin.isatty() and sys.stderr.isatty()
        if not tty:
            raise StartupError(
                f"re-indexing {estimate.notes} notes into {estimate.target['embedding_model']} "
                f"(chunker {estimate.target['chunking_version']}) needs confirmation: run "
                f"`autonote {command} --yes` to start it (estimated {estimate.summary()})"
            )
        typer.echo(estimate.describe(), err=True)
        confirm = ask or (lambda prompt: typer.confirm(prompt, default=False, err=True))
        if not await asyncio.to_thread(confirm, "Start re-indexing?"):
            raise StartupError(f"re-indexing declined: `autonote {command}` not started")

    return gate
