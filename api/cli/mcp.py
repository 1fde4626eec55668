"""`autonote mcp`: the MCP server over stdio, for desktop assistants and editors."""

from __future__ import annotations

from typing import Annotated

import typer

from api.cli.common import api_key_or_exit, run_or_exit, settings_or_exit


def mcp_command(
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="AUTONOTE_API_KEY",
            help="Act as this key's user (default: AUTONOTE_DATA_DIR/api_key)",
        ),
    ] = None,
    allow_writes: Annotated[
        bool,
        typer.Option("--allow-writes", help="Offer create_note and append_to_note too"),
    ] = False,
) -> None:
    """Serve your notes to an assistant over MCP (stdio): tools search_notes, get_note,
    ask, list_recent_notes (and with --allow-writes create_note, append_to_note); notes
    as `note://<id>` resources. Uses the same settings and database as `serve`; configure
    it as a command in the assistant (docs/mcp.md). Exit code 2: bad key or settings."""
    from api.errors import DomainError
    from api.mcp.stdio import serve_stdio

    settings = settings_or_exit()
    key = api_key_or_exit(api_key, settings)
    try:
        run_or_exit(serve_stdio(settings, key, allow_writes=allow_writes))
    except DomainError as exc:  # the key was refused
        typer.echo(f"autonote mcp: {exc.detail}", err=True)
        raise typer.Exit(2) from None
