"""Converting an uploaded file under a time and memory budget.

HTML, DOCX and PDF conversion runs third-party parsers over bytes an end user chose, and a
few kilobytes can cost minutes and gigabytes: a DOCX whose XML inflates 300×, an HTML table
of `colspan=1000` cells, PDF pages sharing one huge content stream (all found by review).
So each such file is converted in a child process with an address-space limit
(`AUTONOTE_IMPORT_MEMORY_MB`) and a wall-clock limit (`AUTONOTE_IMPORT_TIMEOUT_S`); past
either, the child is killed and the file is reported as `too_complex`, while the API and
the other files carry on. Children come from a `forkserver` (started once, with the
converters imported), never forked from the threaded server itself. Markdown and text files
are read in-process: their cost is linear in their size, which is already limited.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
from multiprocessing.connection import Connection
from typing import Any

import structlog

from api.importing import ImportedNote, ImportFileError, convert_file

log = structlog.get_logger(__name__)

_ISOLATED_EXTENSIONS = (".html", ".htm", ".docx", ".pdf")


def _convert_in_child(
    conn: Connection, filename: str, data: bytes, max_bytes: int, memory_bytes: int
) -> None:  # pragma: no cover - runs in the child process
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    result: tuple[Any, ...]
    try:
        result = ("ok", convert_file(filename, data, max_bytes=max_bytes))
    except ImportFileError as exc:
        result = ("error", exc.code, exc.detail)
    except RecursionError:
        result = ("error", "too_large", "the document is nested too deeply to convert")
    except MemoryError:
        # Out at once, allocating nothing more: the parent reads the closed pipe as
        # "over the memory budget". (Building a reply here could stall for as long as
        # the time budget, measured.)
        os._exit(3)
    try:
        conn.send(result)
    except MemoryError:  # the result itself did not fit
        os._exit(3)
    conn.close()


class ConversionSandbox:
    """`convert` = `convert_file` in a killable child process (see module docstring)."""

    def __init__(self, *, timeout_s: float, memory_mb: int) -> None:
        self.timeout_s = timeout_s
        self.memory_bytes = memory_mb * 1024 * 1024
        self._ctx = multiprocessing.get_context("forkserver")
        # The main module too: loaded once in the server, not again in every child.
        self._ctx.set_forkserver_preload(["__main__", "api.notes.conversion"])

    def convert(self, filename: str, data: bytes, *, max_bytes: int) -> ImportedNote:
        """Convert one file (blocking: call it from a worker thread). Raises
        ImportFileError, `too_complex` when the file exceeded the time or memory budget."""
        if not filename.lower().endswith(_ISOLATED_EXTENSIONS) or len(data) > max_bytes:
            return convert_file(filename, data, max_bytes=max_bytes)
        receive, send = self._ctx.Pipe(duplex=False)
        child = self._ctx.Process(
            target=_convert_in_child,
            args=(send, filename, data, max_bytes, self.memory_bytes),
            daemon=True,
        )
        child.start()
        send.close()
        try:
            if not receive.poll(self.timeout_s):
                log.warning("importing.conversion_timeout", timeout_s=self.timeout_s)
                raise ImportFileError(
                    "too_complex", f"converting it took longer than {self.timeout_s:g} s"
                )
            try:
                result = receive.recv()
            except (EOFError, OSError):  # the child died: the memory limit, or a crash
                log.warning("importing.conversion_died", exitcode=child.exitcode)
                raise ImportFileError(
                    "too_complex", "converting it needs more memory than allowed"
                ) from None
        finally:
            if child.is_alive():
                child.kill()
            child.join(5)
            receive.close()
        if result[0] == "ok":
            return result[1]
        raise ImportFileError(result[1], result[2])
