"""The embedded database: a SecantusDB server (MongoDB wire protocol, GPL-2.0, so only ever
run as a separate process, never imported) as a child process.

It runs with `--sync-on-commit`, so a SIGKILL loses no acknowledged write, and dies with its
owner (Linux's parent-death signal, SIGKILL: SecantusDB's SIGTERM handler can deadlock).
Other local processes (`autonote worker`, `migrate`, `check`) attach to the running server
found through `embedded.json` in the data directory (a lock makes "find or start" one step);
only the process that started it stops it, and an attached one whose server went away starts
it again on the same port (`keep_up`). See docs/operations.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import structlog
from pymongo import MongoClient
from pymongo.errors import PyMongoError

log = structlog.get_logger(__name__)

_PR_SET_PDEATHSIG = 1
STALE_AFTER_MS = 3000  # a recorded server silent this long is a crashed owner's leftover


def die_with_parent() -> None:  # pragma: no cover - runs in a child process
    """Have Linux SIGKILL this process when the thread that started it exits."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server_binary() -> str:
    candidate = Path(sys.executable).with_name("secantusd-py")
    if candidate.exists():
        return str(candidate)
    found = shutil.which("secantusd-py")
    if not found:
        raise RuntimeError("secantusd-py not found: `pip install secantusdb` (see README)")
    return found


def _is_secantus(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"secantusd" in cmdline


def url_for(port: int) -> str:
    """Connection string for a local server (it advertises a single-node replica set)."""
    return f"mongodb://127.0.0.1:{port}/?directConnection=true"


def ping(port: int, timeout_ms: int = 300) -> bool:
    """True when a server answers `ping` on `port`."""
    client: MongoClient = MongoClient(
        url_for(port), serverSelectionTimeoutMS=timeout_ms, connectTimeoutMS=timeout_ms
    )
    try:
        client.admin.command("ping")
        return True
    except PyMongoError:
        return False
    finally:
        client.close()


class EmbeddedMongo:
    """Start (or attach to) the embedded server for `data_dir`; `stop()` only if we own it."""

    def __init__(
        self,
        data_dir: Path,
        *,
        cache_size: str = "256M",
        start_timeout_s: float = 60,
        port: int | None = None,
        sync_on_commit: bool = True,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.storage = self.data_dir / "db"
        self.state_file = self.data_dir / "embedded.json"
        self.log_file = self.data_dir / "secantusd.log"
        self.cache_size = cache_size
        # Off only for a throwaway server that is never hard-killed (the test session's):
        # without it a commit is not flushed to disk before it is acknowledged.
        self.sync_on_commit = sync_on_commit
        self.start_timeout_s = start_timeout_s
        self.port: int | None = port
        self._fixed_port = port
        self.process: subprocess.Popen[bytes] | None = None
        self._stopped = False  # stop() was called: this process is done with the server

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("embedded server not started")
        return url_for(self.port)

    @property
    def owner(self) -> bool:
        return self.process is not None

    def _running_instance(self) -> tuple[int, int] | None:
        try:
            state = json.loads(self.state_file.read_text())
            pid, port = int(state["pid"]), int(state["port"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not _is_secantus(pid):
            return None
        # Patient: a server busy with a long fsync may take a while to answer, and the
        # alternative below is killing it.
        if ping(port) or ping(port, timeout_ms=STALE_AFTER_MS):
            return pid, port
        if _is_secantus(pid):
            # A server that holds our data directory but does not answer: a leftover from a
            # crashed owner. It must go, or the new server cannot open the storage.
            log.warning("embedded_db.stale_server_killed", pid=pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        return None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One process at a time finds or starts the server of this data directory."""
        with (self.data_dir / "embedded.lock").open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def exists(self) -> bool:
        """Whether this data directory holds a database (or a server is running on it)."""
        return self.storage.is_dir() or self.state_file.exists()

    def start(self) -> str:
        """Attach to a live server for this data dir, or start one; return its URL.

        Call from the thread that lives as long as the server should (the parent-death
        signal is tied to the creating thread).
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self._locked():
            running = self._running_instance()
            if running is not None:
                self.port = running[1]
                log.info("embedded_db.attached", port=self.port, pid=running[0])
                return self.url
            self.port = self._fixed_port or self._previous_port() or _free_port()
            return self._spawn()

    def _previous_port(self) -> int | None:
        """The port of the server last run on this data directory, if it is free: processes
        still attached to it reconnect to the new server without a restart."""
        try:
            port = int(json.loads(self.state_file.read_text())["port"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            # As the server binds: connections of the old one in TIME_WAIT do not matter.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return None
        return port

    def _recorded_server_gone(self) -> bool:
        """Whether no server runs as recorded in `embedded.json` (its owner stopped it, or
        it died). Only whether the process lives: a live server that is slow to answer (a
        long fsync) is not gone, and is never killed from here."""
        try:
            pid = int(json.loads(self.state_file.read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return True
        return not _is_secantus(pid)

    def restart_if_gone(self) -> bool:
        """Start the server again on the same port when it is gone (its owner exited or it
        crashed), so this process's clients reconnect; True when this process did. Cheap
        while the server runs: no lock, no connection, two small file reads."""
        if self._stopped or self.port is None:
            return False
        if self.process is not None and self.process.poll() is None:
            return False  # ours, running
        if not self._recorded_server_gone():
            self.process = None  # ours died and another process started it again
            return False
        with self._locked():
            self.process = None
            if not self._recorded_server_gone():
                return False  # another process got here first
            self._fixed_port = self.port
            log.warning("embedded_db.restarting", port=self.port)
            self._spawn()
            return True

    def _spawn(self) -> str:
        assert self.port is not None
        args = [
            _server_binary(),
            "--storage-path",
            str(self.storage),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            *(["--sync-on-commit"] if self.sync_on_commit else []),
            "--cache-size",
            self.cache_size,
            "--log-level",
            "WARNING",
        ]
        logf = self.log_file.open("ab")
        self.process = subprocess.Popen(
            args,
            stdout=logf,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        logf.close()
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log_file.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"embedded database exited at start-up:\n{tail}")
            if ping(self.port, timeout_ms=200):
                break
            time.sleep(0.05)
        else:
            self.stop()
            raise RuntimeError(f"embedded database did not answer within {self.start_timeout_s}s")
        self.state_file.write_text(json.dumps({"pid": self.process.pid, "port": self.port}))
        log.info(
            "embedded_db.started", port=self.port, pid=self.process.pid, path=str(self.storage)
        )
        return self.url

    def _exited(self, proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
        """Wait up to `timeout_s` for a server sent SIGTERM to exit. Two SecantusDB quirks
        would cost time here. Its stop closes the listening socket, then waits 2 s for the
        accept thread, which the close does not wake (Linux): a connection does, so one is
        made every 50 ms. And its main thread waits in an untimed `Event.wait`, so when
        another of its threads takes the signal (one starting a thread for a new connection,
        say), the Python handler waits for the main thread to wake, which it never does, and
        the server serves on until the SIGKILL. A server still answering a ping a second
        after its SIGTERM has not begun to stop (a stopping one refuses connections once its
        accept thread is gone): it is sent SIGTERM again."""
        deadline = time.monotonic() + timeout_s
        resend_at = time.monotonic() + 1.0
        while True:
            try:
                proc.wait(min(0.05, max(deadline - time.monotonic(), 0)))
                return True
            except subprocess.TimeoutExpired:
                now = time.monotonic()
                if now >= deadline:
                    return False
            if self.port is None:
                continue
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            if now >= resend_at:
                if ping(self.port):
                    log.warning("embedded_db.sigterm_resent", pid=proc.pid)
                    proc.terminate()
                resend_at = time.monotonic() + 1.0

    def stop(self, timeout_s: float = 20) -> None:
        """Stop the server cleanly (SIGTERM, then SIGKILL after `timeout_s`) if we own it.
        Either way this process is done with it: `restart_if_gone` no longer restarts it."""
        self._stopped = True
        proc, self.process = self.process, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            if not self._exited(proc, timeout_s):
                log.warning("embedded_db.kill_after_timeout", pid=proc.pid)
                proc.kill()
                proc.wait()
        with contextlib.suppress(OSError, ValueError):
            state = json.loads(self.state_file.read_text())
            if state.get("pid") == proc.pid:
                # No pid: nothing runs here now. The port stays, for the next start.
                self.state_file.write_text(json.dumps({"pid": None, "port": self.port}))
        log.info("embedded_db.stopped", pid=proc.pid)


async def keep_up(embedded: EmbeddedMongo, every_s: float = 1.0) -> None:
    """While this process runs, restart the embedded server if it goes away (see module
    docstring). The start runs on this thread (the event loop's, which lives as long as
    the process), as the parent-death signal requires; it blocks the loop for the second
    or two the server takes to start, while the database is unavailable anyway."""
    while True:
        await asyncio.sleep(every_s)
        try:
            embedded.restart_if_gone()
        except Exception as exc:  # keep trying: the next round may succeed
            log.warning("embedded_db.restart_failed", error=type(exc).__name__, detail=str(exc))


@asynccontextmanager
async def embedded_server(
    data_dir: Path, *, must_exist: bool = False
) -> AsyncIterator[EmbeddedMongo]:
    """The embedded server for `data_dir` (attached or started; `.url`), kept up while
    the block runs and stopped at its end if this process started it. `must_exist`: raise
    FileNotFoundError rather than create a database where there is none (commands that
    only read or fix one, so a mistyped AUTONOTE_DATA_DIR is not reported as healthy)."""
    embedded = EmbeddedMongo(data_dir)
    if must_exist and not embedded.exists():
        raise FileNotFoundError(
            f"no database in {embedded.data_dir.resolve()} (AUTONOTE_DATA_DIR); "
            "start the API there first, or set MONGODB_URL"
        )
    embedded.start()
    keeper = asyncio.create_task(keep_up(embedded), name="embedded-db-keeper")
    try:
        yield embedded
    finally:
        keeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeper
        embedded.stop()
