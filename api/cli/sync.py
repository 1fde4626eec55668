"""`autonote sync`: a folder mirrored into a running server, once or while it changes."""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from api.cli.common import (
    ApiKeyOption,
    RootOption,
    TagOption,
    UrlOption,
    api_key_or_exit,
    http_client,
    settings_or_exit,
)

if TYPE_CHECKING:
    from api.importing.mirror import Mirror


def sync(
    folder: Annotated[
        Path, typer.Argument(help="The folder (e.g. an Obsidian vault or a folder of it)")
    ],
    watch: Annotated[
        bool, typer.Option("--watch", help="Keep mirroring as files change (Ctrl-C stops)")
    ] = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    root: RootOption = None,
    tag: TagOption = None,
) -> None:
    """Mirror FOLDER into a running server as notes of the key's user: every supported file
    is created or updated by its key (its path from the root, as `import` keys it), and
    notes whose key lies under FOLDER but whose file is gone are trashed. A moved file
    keeps its note. Hidden folders (.obsidian, .git, .trash) are skipped. Exits 1 if any
    file failed."""
    from api.importing.keys import find_root, folder_prefix
    from api.importing.mirror import Mirror
    from api.importing.upload import Remote, Uploader

    settings = settings_or_exit()
    key = api_key_or_exit(api_key, settings)
    if not folder.is_dir():
        typer.echo(f"autonote: not a folder: {folder}", err=True)
        raise typer.Exit(2)
    base = root or find_root(folder)
    prefix = folder_prefix(folder, base)
    if prefix is None:
        typer.echo(f"autonote: {folder} is not inside --root {root}", err=True)
        raise typer.Exit(2)
    url = url or settings.base_url
    with http_client(url, key) as client:
        uploader = Uploader(Remote(client, url), settings, tag, quiet=True)
        mirror = Mirror(uploader, folder, base, prefix)
        if not watch:
            mirror.full()
        else:
            try:
                _watch(mirror)
            except KeyboardInterrupt:  # during a pass: stop there
                pass
    typer.echo(mirror.summary())
    raise typer.Exit(1 if uploader.counts["failed"] else 0)


def _watch(mirror: Mirror) -> None:
    """A full pass once the watcher runs (nothing made meanwhile is missed), then each
    batch of changes, until Ctrl-C or SIGTERM."""
    from watchfiles import watch

    from api.importing.mirror import relevant

    signal.signal(signal.SIGTERM, signal.default_int_handler)
    # Each batch is reported by the mirror; the watcher's own "N changes detected" is noise.
    logging.getLogger("watchfiles").setLevel(logging.WARNING)
    started = False
    for changes in watch(
        mirror.folder,
        watch_filter=relevant(mirror.folder),
        rust_timeout=500,
        yield_on_timeout=True,
        raise_interrupt=False,
    ):
        if not started:
            started = True
            mirror.full()
            typer.echo(f"watching     {mirror.folder} (Ctrl-C to stop)")
        elif changes:
            mirror.changed(changes)
