"""`autonote import`: files and folders into a running server, each file keyed by its path
from its root, so importing again updates instead of duplicating."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from api.cli.common import (
    ApiKeyOption,
    RootOption,
    TagOption,
    UrlOption,
    api_key_or_exit,
    files_or_exit,
    http_client,
    settings_or_exit,
)

if TYPE_CHECKING:
    from api.importing.upload import Item, Uploader


def import_files(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (e.g. an Obsidian vault)")],
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    root: RootOption = None,
    tag: TagOption = None,
    batch: Annotated[int, typer.Option(min=1, max=200, help="Files per request")] = 20,
) -> None:
    """Import .md/.txt/.html/.docx/.pdf files (folders recursively; hidden folders such as
    .obsidian are skipped) into a running server as notes of the key's user. Each file is
    keyed by its path from its root: importing it again updates its note (or leaves it as
    it is), never makes a second one. Prints one line per file; exits 1 if any file
    failed."""
    from api.importing.upload import Remote, Uploader

    settings = settings_or_exit()
    key = api_key_or_exit(api_key, settings)
    files, skipped = files_or_exit(paths)
    url = url or settings.base_url
    with http_client(url, key) as client:
        run = Uploader(Remote(client, url), settings, tag, batch=batch)
        run.counts["failed"] = sum(code == "unreadable" for _, code in skipped)
        run.send(keyed(run, files, paths, root))
    typer.echo(run.summary(len(skipped)))
    raise typer.Exit(1 if run.counts["failed"] else 0)


def keyed(run: Uploader, files: list[Path], args: list[Path], root: Path | None) -> list[Item]:
    """Each file with its key: its path from the root of the argument it was found under;
    a file without a valid key is reported as failed (`run.fail`)."""
    from api.importing.keys import file_key, find_root, key_problem
    from api.importing.upload import shown_path

    roots = [(arg, root or find_root(arg if arg.is_dir() else arg.parent)) for arg in args]
    items: list[Item] = []
    for file in files:
        arg_root = next((r for a, r in roots if a == file or file_key(file, a)), roots[0][1])
        key = file_key(file, arg_root)
        problem = "bad_key: not below --root" if key is None else key_problem(key)
        if problem is None:
            items.append((file, key))
        else:
            run.fail(shown_path(file), problem)
    return items
