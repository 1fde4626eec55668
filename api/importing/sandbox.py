"""Converting an uploaded file under a time and memory budget.

HTML, DOCX and PDF files are converted in a child process (from a `forkserver`) with an
address-space limit (`AUTONOTE_IMPORT_MEMORY_MB`) and a wall-clock limit
(`AUTONOTE_IMPORT_TIMEOUT_S`); past either, the file is `too_complex` and the rest go on.
Markdown and text files are read in-process.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import resource
from multiprocessing.connection import Connection
from typing import Any

import structlog

from api.db.embedded import die_with_parent
from api.importing import (
    SUPPORTED_EXTENSIONS,
    TEXT_EXTENSIONS,
    ImportedNote,
    ImportFileError,
    convert_file,
)

log = structlog.get_logger(__name__)

# Every type that goes through a parser (text files are stored as written).
_ISOLATED_EXTENSIONS = tuple(sorted(SUPPORTED_EXTENSIONS - TEXT_EXTENSIONS))


def _convert_in_child(
    conn: Connection,
    filename: str,
    data: bytes,
    max_bytes: int,
    memory_bytes: int,
    timeout_s: float,
) -> None:  # pragma: no cover - runs in the child process
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    # Its own deadline too, and death with the forkserver: if the API process is killed,
    # nothing would be left to kill a child that converts on for minutes.
    cpu = math.ceil(timeout_s) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    die_with_parent()
    result: tuple[Any, ...]
    try:
        result = ("ok", convert_file(filename, data, max_bytes=max_bytes))
    except ImportFileError as exc:
        result = ("error", exc.code, exc.detail)
    except RecursionError:
        result = ("error", "too_large", "the document is nested too deeply to convert")
    except MemoryError:
        # Out at once, allocating nothing more: the parent reads the closed pipe as
        # "over the memory budget" (building a reply here can stall for as long as the
        # time budget).
        os._exit(3)
    try:
        conn.send(result)
    except MemoryError:  # the result itself did not fit
        os._exit(3)
    conn.close()


class Conversion:
    """One file being converted in a child process: `wait` for it (blocking, from a
    worker thread), or `kill` it (from anywhere: the waiting thread then returns)."""

    def __init__(self, process: Any, receive: Connection, timeout_s: float) -> None:
        self._process = process
        self._receive = receive
        self._timeout_s = timeout_s

    def kill(self) -> None:
        if self._process.is_alive():
            self._process.kill()
            self._process.join(2)  # SIGKILL: gone within milliseconds

    def wait(self) -> ImportedNote:
        """The converted note; ImportFileError as `convert_file` raises it, or
        `too_complex` past the time or memory budget (or when killed)."""
        try:
            if not self._receive.poll(self._timeout_s):
                log.warning("importing.conversion_timeout", timeout_s=self._timeout_s)
                raise ImportFileError(
                    "too_complex", f"converting it took longer than {self._timeout_s:g} s"
                )
            try:
                result = self._receive.recv()
            except (EOFError, OSError):  # the child died: the memory limit, or killed
                log.warning("importing.conversion_died", exitcode=self._process.exitcode)
                raise ImportFileError(
                    "too_complex", "converting it needs more memory or time than allowed"
                ) from None
        finally:
            self.kill()
            self._process.join(5)
            self._receive.close()
        if result[0] == "ok":
            return result[1]
        raise ImportFileError(result[1], result[2])


class ConversionSandbox:
    """Runs `convert_file` in killable child processes (see module docstring)."""

    def __init__(self, *, timeout_s: float, memory_mb: int) -> None:
        self.timeout_s = timeout_s
        self.memory_bytes = memory_mb * 1024 * 1024
        self._ctx = multiprocessing.get_context("forkserver")
        # The main module too: loaded once in the server, not again in every child. (So
        # a script starting the app must guard its entry point with `__name__`, as
        # multiprocessing requires; `autonote serve` and `uvicorn` do.)
        self._ctx.set_forkserver_preload(["__main__", "api.importing.sandbox"])

    def isolated(self, filename: str, data: bytes, max_bytes: int) -> bool:
        """Whether this file is converted in a child (HTML, DOCX, PDF within the limit)."""
        return filename.lower().endswith(_ISOLATED_EXTENSIONS) and len(data) <= max_bytes

    def start(self, filename: str, data: bytes, *, max_bytes: int) -> Conversion:
        """Start converting one file in a child process (blocking for the ~15 ms of the
        start: call it from a worker thread)."""
        receive, send = self._ctx.Pipe(duplex=False)
        child = self._ctx.Process(
            target=_convert_in_child,
            args=(send, filename, data, max_bytes, self.memory_bytes, self.timeout_s),
            daemon=True,
        )
        child.start()
        send.close()
        return Conversion(child, receive, self.timeout_s)

    def convert(self, filename: str, data: bytes, *, max_bytes: int) -> ImportedNote:
        """Convert one file, blocking (in a child when `isolated`)."""
        if not self.isolated(filename, data, max_bytes):
            return convert_file(filename, data, max_bytes=max_bytes)
        return self.start(filename, data, max_bytes=max_bytes).wait()
