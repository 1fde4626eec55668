"""The client side of `autonote import`: which files are sent, in which batches, and how
one batch is posted (the server side is `api.importing.service`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from tenacity import RetryCallState, Retrying, retry_if_result, stop_after_attempt

from api.config import Settings

if TYPE_CHECKING:
    import httpx


def shown_path(path: Path) -> str:
    """`path` printable on any stdout: bytes that are not UTF-8 as `\\xe9` escapes."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def unsendable(path: Path, name: str, settings: Settings) -> str | None:
    """Why `path` is reported instead of uploaded: a name that is not UTF-8 (httpx would
    raise) or a file over the per-file limit (never read into memory only to be
    refused)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "not_utf8: the file name is not valid UTF-8"
    try:
        size = path.stat().st_size
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    if size > settings.autonote_max_import_file_bytes:
        limit = settings.autonote_max_import_file_bytes
        return f"too_large: {size} bytes, over the per-file limit of {limit} bytes"
    return None


def post_import(
    client: httpx.Client, upload: list[Any], data: dict[str, Any] | None, timeout: httpx.Timeout
) -> httpx.Response:
    """POST one batch; a 429 (refused before anything is read or stored) is retried after
    its Retry-After, up to 5 posts in all, instead of failing the batch; the last answer
    is returned whatever it is."""

    def retry_after(state: RetryCallState) -> float:
        resp = state.outcome.result() if state.outcome is not None else None
        wait = min(60.0, float(resp.headers.get("retry-after") or 1)) if resp else 1.0
        typer.echo(f"autonote: rate limited; retrying in {wait:g} s", err=True)
        return wait

    retrying = Retrying(
        retry=retry_if_result(lambda resp: resp.status_code == 429),
        wait=retry_after,
        stop=stop_after_attempt(5),
        retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
    )
    return retrying(client.post, "/v1/notes/import", files=upload, data=data, timeout=timeout)


def import_batches(files: list[Path], max_files: int, max_bytes: int) -> list[list[Path]]:
    """Files grouped for upload: at most `max_files` per request, and at most `max_bytes`
    (AUTONOTE_MAX_IMPORT_BYTES, less room for the multipart framing) unless one file is
    bigger alone (batching by count only would send five 10 MB PDFs in one request over
    the server's limit)."""
    budget = max(1, max_bytes - 64 * 1024)
    batches: list[list[Path]] = []
    current: list[Path] = []
    size = 0
    for path in files:
        try:
            n = path.stat().st_size
        except OSError:
            n = 0  # reported when it is read
        if current and (len(current) >= max_files or size + n > budget):
            batches.append(current)
            current, size = [], 0
        current.append(path)
        size += n
    if current:
        batches.append(current)
    return batches
