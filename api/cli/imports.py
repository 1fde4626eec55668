"""`autonote import`: files and folders into a running server."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from api.cli.common import settings_or_exit

if TYPE_CHECKING:
    import httpx

    from api.config import Settings


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
    from api.importing.upload import import_batches

    key = _api_key(api_key, settings)
    files, skipped = _expand(paths)
    url = url or settings.base_url
    with httpx.Client(
        base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=300
    ) as client:
        run = _Importer(client, url, paths, settings, tag)
        run.failed = sum(code == "unreadable" for _, code in skipped)  # unlisted folders
        pending = import_batches(files, batch, settings.autonote_max_import_bytes)
        while pending:
            upload, sent = run.read(pending.pop(0))
            if upload:
                pending[:0] = run.post(upload, sent)
    typer.echo(f"{run.imported} imported, {run.failed} failed, {len(skipped)} skipped")
    raise typer.Exit(1 if run.failed else 0)


def _api_key(given: str | None, settings: Settings) -> str:
    """The key given, else the one `autonote serve` wrote to the data dir; exit 2 if none."""
    key = given
    key_file = settings.autonote_data_dir / "api_key"
    if key is None and key_file.exists():
        key = key_file.read_text().strip()
    if not key:
        typer.echo("autonote: no API key (pass --api-key or set AUTONOTE_API_KEY)", err=True)
        raise typer.Exit(2)
    return key


def _expand(paths: list[Path]) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The files to send, and the paths skipped with why (each printed); exit 2 when an
    argument does not exist."""
    from api.importing import iter_import_paths
    from api.importing.upload import shown_path

    skipped: list[tuple[Path, str]] = []
    try:
        files = list(iter_import_paths(paths, on_skip=lambda p, code: skipped.append((p, code))))
    except FileNotFoundError as exc:
        typer.echo(f"autonote: {exc}", err=True)
        raise typer.Exit(2) from None
    for path, code in skipped:
        typer.echo(f"skipped      {shown_path(path)} ({code.replace('_', ' ')})")
    return files, skipped


Upload = list[tuple[str, tuple[str, bytes]]]  # httpx's multipart `files`


@dataclass(slots=True)
class _Importer:
    """Sends batches of files to one server and tallies the outcome (one line per file)."""

    client: httpx.Client
    url: str
    roots: list[Path]  # the command's arguments (upload names are relative to them)
    settings: Settings
    tags: list[str] | None
    imported: int = 0
    failed: int = 0

    def read(self, group: list[Path]) -> tuple[Upload, list[Path]]:
        """The multipart files of one batch and the paths they come from; a file that
        cannot be sent (bad name, too big, unreadable) is reported and counted as failed."""
        from api.importing import upload_name
        from api.importing.upload import shown_path, unsendable

        upload: Upload = []
        sent: list[Path] = []
        for path in group:
            name = upload_name(path, self.roots)
            problem = unsendable(path, name, self.settings)
            if problem is None:
                try:
                    upload.append(("files", (name, path.read_bytes())))
                    sent.append(path)
                    continue
                except OSError as exc:
                    problem = f"unreadable: {exc.strerror or exc}"
            self.failed += 1
            typer.echo(f"failed       {shown_path(path)}: {problem}")
        return upload, sent

    def post(self, upload: Upload, sent: list[Path]) -> list[list[Path]]:
        """Send one batch and print its outcome; returns the batches to send instead (its
        halves, when the server's request limit is lower than ours). Exit 2 when the
        server cannot be reached or refuses the key."""
        import httpx

        from api.importing.upload import post_import, shown_path

        data = {"tags": self.tags} if self.tags else None
        # Each file may take the server's whole conversion budget: the read timeout allows
        # for all of them, so a batch the server is still converting is not given up on
        # (and sent again, making its notes twice).
        budget = self.settings.autonote_import_timeout_s
        timeout = httpx.Timeout(30, read=len(upload) * budget + 60)
        try:
            resp = post_import(self.client, upload, data, timeout)
        except httpx.HTTPError as exc:
            typer.echo(f"autonote: cannot reach {self.url}: {exc}", err=True)
            raise typer.Exit(2) from None
        if resp.status_code in (401, 403):  # no point in sending the rest
            typer.echo(f"autonote: server answered {resp.status_code}: {resp.text}", err=True)
            raise typer.Exit(2)
        if resp.status_code == 413 and len(sent) > 1:
            half = len(sent) // 2
            return [sent[:half], sent[half:]]
        if resp.status_code != 200:  # this batch only; the others go on
            answer = f"HTTP {resp.status_code}: {resp.text[:200]}"
            for path in sent:
                self.failed += 1
                typer.echo(f"failed       {shown_path(path)}: {answer}")
            return []
        self._print_imported(resp.json())
        return []

    def _print_imported(self, body: dict[str, Any]) -> None:
        """One line per file of the server's answer (and its warnings)."""
        for item in body["imported"]:
            self.imported += 1
            note = item["note"]
            typer.echo(f"imported     {item['filename']} -> {note['id']} {note['title']!r}")
            for warning in item.get("warnings") or []:
                typer.echo(f"  warning    {warning}")
        for item in body["errors"]:
            self.failed += 1
            typer.echo(f"failed       {item['filename']}: {item['error']}: {item['detail']}")
