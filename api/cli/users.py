"""`autonote users create`."""

from __future__ import annotations

from typing import Annotated

import typer

from api.cli.common import database, run_or_exit, settings_or_exit


def users_create(name: Annotated[str, typer.Argument(help="Display name of the user")]) -> None:
    """Create a user directly in the database and print its API key (shown once)."""
    from api.users.repository import UsersRepository
    from api.users.schemas import clean_user_name
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
            # stdout is the key alone (`KEY=$(autonote users create bob)`); who it belongs
            # to goes to stderr.
            typer.echo(f"user {created.user_id} ({name})", err=True)
            typer.echo(created.api_key)

    run_or_exit(run())
