"""The client side of `autonote import` and `autonote sync`: which files are sent, in which
batches, how one batch is posted, and one line per file of what the server did (the server
side is `api.importing.service`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from tenacity import RetryCallState, Retrying, retry_if_result, stop_after_attempt

from api.config import Settings

if TYPE_CHECKING:
    import httpx

# A file to send and its key (None: a new note every time).
Item = tuple[Path, str | None]
Upload = list[tuple[str, tuple[str, bytes]]]  # httpx's multipart `files`


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


def request(client: httpx.Client, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """One API request; a 429 (refused before anything is read or stored) is retried after
    its Retry-After, up to 5 tries in all; the last answer is returned whatever it is."""

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
    return retrying(client.request, method, url, **kwargs)


def import_batches(files: list[Item], max_files: int, max_bytes: int) -> list[list[Item]]:
    """Files grouped for upload: at most `max_files` per request, and at most `max_bytes`
    (AUTONOTE_MAX_IMPORT_BYTES, less room for the multipart framing) unless one file is
    bigger alone (batching by count only would send five 10 MB PDFs in one request over
    the server's limit)."""
    budget = max(1, max_bytes - 64 * 1024)
    batches: list[list[Item]] = []
    current: list[Item] = []
    size = 0
    for item in files:
        try:
            n = item[0].stat().st_size
        except OSError:
            n = 0  # reported when it is read
        if current and (len(current) >= max_files or size + n > budget):
            batches.append(current)
            current, size = [], 0
        current.append(item)
        size += n
    if current:
        batches.append(current)
    return batches


@dataclass(slots=True)
class Remote:
    """A running server, spoken to with one API key."""

    client: httpx.Client
    url: str

    def call(self, method: str, url: str, *, fatal: bool = True, **kwargs: Any) -> httpx.Response:
        """One request. Exit 2 when the server cannot be reached or refuses the key (no
        point in going on); with `fatal`, also on any other error status."""
        import httpx

        try:
            resp = request(self.client, method, url, **kwargs)
        except httpx.HTTPError as exc:
            typer.echo(f"autonote: cannot reach {self.url}: {exc}", err=True)
            raise typer.Exit(2) from None
        if resp.status_code in (401, 403) or (fatal and resp.status_code >= 400):
            typer.echo(f"autonote: server answered {resp.status_code}: {resp.text}", err=True)
            raise typer.Exit(2)
        return resp

    def notes(self, **params: Any) -> Iterator[dict[str, Any]]:
        """Every note of a listing (`GET /v1/notes` with `params`), page by page."""
        cursor = None
        while True:
            page = {**params, "limit": 100, **({"cursor": cursor} if cursor else {})}
            body = self.call("GET", "/v1/notes", params=page).json()
            yield from body["items"]
            cursor = body["next_cursor"]
            if cursor is None:
                return


@dataclass(slots=True)
class Uploader:
    """Sends files to one server in batches and tallies what became of each (one line per
    file; `quiet` leaves out the unchanged ones). The items of one run all have keys, or
    none has."""

    remote: Remote
    settings: Settings
    tags: list[str] | None
    batch: int = 20
    quiet: bool = False
    counts: Counter[str] = field(default_factory=Counter)

    def send(self, items: list[Item]) -> None:
        """Upload every item, in batches; exit 2 when the server cannot be reached or
        refuses the key."""
        limit = self.settings.autonote_max_import_bytes
        pending = import_batches(items, self.batch, limit)
        while pending:
            upload, keyed, sent = self._read(pending.pop(0))
            if upload:
                pending[:0] = self._post(upload, keyed, sent)

    def fail(self, shown: str, problem: str) -> None:
        self.counts["failed"] += 1
        typer.echo(f"failed       {shown}: {problem}")

    def _read(self, group: list[Item]) -> tuple[Upload, bool, list[Item]]:
        """The multipart files of one batch, whether they are keyed (their names are their
        keys), and the items they come from; a file that cannot be sent (bad name, too
        big, unreadable) is reported as failed."""
        upload: Upload = []
        keyed = False
        sent: list[Item] = []
        for path, key in group:
            name = key or path.name
            problem = unsendable(path, name, self.settings)
            if problem is None:
                try:
                    upload.append(("files", (name, path.read_bytes())))
                except OSError as exc:
                    problem = f"unreadable: {exc.strerror or exc}"
            if problem is not None:
                self.fail(shown_path(path), problem)
                continue
            sent.append((path, key))
            keyed = keyed or key is not None
        return upload, keyed, sent

    def _post(self, upload: Upload, keyed: bool, sent: list[Item]) -> list[list[Item]]:
        """Send one batch and print its outcome; returns the batches to send instead (its
        halves, when the server's request limit is lower than ours)."""
        import httpx

        data: dict[str, Any] = {
            "tags": self.tags or [],
            **({"key_by": "filename"} if keyed else {}),
        }
        # Each file may take the server's whole conversion budget: the read timeout allows
        # for all of them, so a batch the server is still converting is not given up on
        # (and sent again, making its notes twice).
        budget = self.settings.autonote_import_timeout_s
        timeout = httpx.Timeout(30, read=len(upload) * budget + 60)
        resp = self.remote.call(
            "POST", "/v1/notes/import", files=upload, data=data, timeout=timeout, fatal=False
        )
        if resp.status_code == 413 and len(sent) > 1:
            half = len(sent) // 2
            return [sent[:half], sent[half:]]
        if resp.status_code != 200:  # this batch only; the others go on
            answer = f"HTTP {resp.status_code}: {resp.text[:200]}"
            for path, _ in sent:
                self.fail(shown_path(path), answer)
            return []
        self._print(resp.json())
        return []

    def _print(self, body: dict[str, Any]) -> None:
        """One line per file of the server's answer (and its warnings)."""
        for item in body["imported"]:
            outcome, note = item["outcome"], item["note"]
            self.counts[outcome] += 1
            if self.quiet and outcome == "unchanged":
                continue
            typer.echo(f"{outcome:<12} {item['filename']} -> {note['id']} {note['title']!r}")
            for warning in item.get("warnings") or []:
                typer.echo(f"  warning    {warning}")
        for item in body["errors"]:
            self.fail(item["filename"], f"{item['error']}: {item['detail']}")

    @property
    def imported(self) -> int:
        return sum(self.counts[k] for k in ("created", "updated", "unchanged"))

    def summary(self, skipped: int) -> str:
        c = self.counts
        return (
            f"{self.imported} imported, {c['failed']} failed, {skipped} skipped "
            f"({c['created']} created, {c['updated']} updated, {c['unchanged']} unchanged)"
        )
