"""`autonote export`: every note of the key's user as markdown files in a folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from api.cli.common import ApiKeyOption, UrlOption, api_key_or_exit, http_client, settings_or_exit


def export_notes(
    folder: Annotated[Path, typer.Argument(help="Where to write the files (created if missing)")],
    include_trashed: Annotated[
        bool, typer.Option("--include-trashed", help="Also write trashed notes, under .trash/")
    ] = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
) -> None:
    """Write every note of the key's user as a markdown file: at its external_id when it
    has one, else as "<title> <short id>.md", with front matter holding its id, title,
    tags, times and key, then its content exactly as stored. `autonote import` or `sync` of
    the folder into an empty database gives the same notes back."""
    from api.importing.exporter import Exporter
    from api.importing.upload import Remote

    settings = settings_or_exit()
    key = api_key_or_exit(api_key, settings)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        typer.echo(f"autonote: cannot create {folder}: {exc.strerror or exc}", err=True)
        raise typer.Exit(2) from None
    url = url or settings.base_url
    with http_client(url, key) as client:
        exporter = Exporter(Remote(client, url), folder)
        exporter.export("active")
        if include_trashed:
            exporter.export("trashed")
    typer.echo(f"{exporter.counts['exported']} exported")
