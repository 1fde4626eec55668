"""`autonote import`: files and folders into a running server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from api.cli.common import settings_or_exit


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
