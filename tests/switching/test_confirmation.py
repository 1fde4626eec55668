"""`autonote serve` and `autonote worker` on a database indexed with another chunker: on a
terminal they print what re-indexing will cost and ask (no stops the start, yes goes on);
without a terminal they refuse in one line naming `--yes`, having written nothing; `--yes`
starts without asking. With nothing changed they start unattended, as `make run` does."""

from __future__ import annotations

import json
import os
import pty
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from tests.conftest import running_app
from tests.switching.support import populate

ROOT = Path(__file__).resolve().parents[2]
NOTES = 4
# The chunker the subprocesses are configured with: not the one the notes were indexed by.
CHANGED = {"CHUNKING_MAX_TOKENS": "32", "CHUNKING_MIN_TOKENS": "8"}


class Command:
    """An `autonote` subprocess whose output (stdout and stderr together) is collected as it
    comes; on a pseudo-terminal when `tty`, so it can be asked and answered."""

    def __init__(self, args: list[str], env: dict[str, str], *, tty: bool) -> None:
        self._text: list[str] = []
        self._lock = threading.Lock()
        if tty:
            self._fd, child = pty.openpty()
            streams: dict[str, Any] = {"stdin": child, "stdout": child, "stderr": child}
        else:
            self._fd, child = os.pipe()
            streams = {"stdin": subprocess.DEVNULL, "stdout": child, "stderr": child}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "api.cli", *args], cwd=ROOT, env=env, **streams
        )
        os.close(child)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self._fd, 4096)
            except OSError:  # a closed pseudo-terminal reads as EIO
                return
            if not data:
                return
            with self._lock:
                self._text.append(data.decode("utf-8", "replace"))

    @property
    def output(self) -> str:
        with self._lock:
            return "".join(self._text)

    def wait_for(self, text: str, timeout_s: float = 180.0) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.output:
            assert self.proc.poll() is None, f"exited {self.proc.returncode}: {self.output}"
            assert time.monotonic() < deadline, f"{text!r} not seen: {self.output[-3000:]}"
            time.sleep(0.05)

    def answer(self, line: str) -> None:
        os.write(self._fd, line.encode() + b"\n")

    def finish(self, timeout_s: float = 120.0) -> int:
        code = self.proc.wait(timeout_s)
        self._reader.join(10)
        os.close(self._fd)
        return code

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.finish()


@contextmanager
def command(args: list[str], env: dict[str, str], *, tty: bool = False) -> Iterator[Command]:
    running = Command(args, env, tty=tty)
    try:
        yield running
    finally:
        if running.proc.poll() is None:
            running.proc.kill()
            running.finish()


@pytest.fixture
async def indexed(make_settings: Any, mongo_url: str, db_name: str, tmp_path: Path) -> Any:
    """A database with NOTES notes indexed by the default chunker; the environment of an
    `autonote` command on it."""
    async with running_app(make_settings()) as api:
        h = await api.new_user()
        await populate(api, h, NOTES)
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "MONGODB_", "AUTONOTE_", "CHUNKING_", "EMBEDDING_"))
    }
    return {
        **base,
        "PYTHONPATH": str(ROOT),
        "MONGODB_URL": mongo_url,
        "MONGODB_DB": db_name,
        "AUTONOTE_DATA_DIR": str(tmp_path / "cli-data"),
        "AUTONOTE_CREATE_DEFAULT_USER": "false",
        "EMBEDDING_PROVIDER": "local",
        "LOG_JSON": "true",
        "LOG_LEVEL": "INFO",
        "COLUMNS": "200",
    }


def database(env: dict[str, str]) -> Any:
    return MongoClient(env["MONGODB_URL"])[env["MONGODB_DB"]]


def untouched(env: dict[str, str]) -> None:
    """Nothing of a re-index was written: no reader records, one generation of chunks."""
    db = database(env)
    try:
        assert db.search_generations.count_documents({}) == 0
        assert len(db.note_chunks.distinct("generation")) == 1
    finally:
        db.client.close()


def free_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def test_without_a_terminal_both_refuse_in_one_line_naming_yes(indexed: dict[str, str]) -> None:
    env = {**indexed, **CHANGED}
    for args, code in ((["worker"], 2), (["serve", "--port", free_port()], None)):
        with command(args, env) as cli:
            returned = cli.finish()
        output = cli.output
        assert returned != 0 if code is None else returned == code, (returned, output[-2000:])
        assert "Traceback" not in output, output[-3000:]
        lines = [line for line in output.splitlines() if f"autonote {args[0]} --yes" in line]
        assert len(lines) == 1, output[-3000:]
        assert f"re-indexing {NOTES} notes" in lines[0] and "tokens to embed" in lines[0]
        assert "Start re-indexing?" not in output
        untouched(env)


def test_on_a_terminal_no_stops_the_start_and_yes_starts_it(indexed: dict[str, str]) -> None:
    env = {**indexed, **CHANGED}
    with command(["worker"], env, tty=True) as cli:
        cli.wait_for("Start re-indexing?")
        assert f"{NOTES} notes of 1 users will be re-indexed" in cli.output
        assert "Estimated tokens to embed" in cli.output
        cli.answer("n")
        assert cli.finish() == 2
    assert "re-indexing declined" in cli.output
    untouched(env)

    with command(["worker"], env, tty=True) as cli:
        cli.wait_for("Start re-indexing?")
        cli.answer("y")
        cli.wait_for('"worker.ready"')
        assert cli.stop() == 0, cli.output[-2000:]
    db = database(env)
    try:
        (record,) = db.search_generations.find().to_list()
        assert record["switch"]["notes_total"] == NOTES, "the switch started"
    finally:
        db.client.close()


def test_yes_starts_without_asking_and_logs_the_cost(indexed: dict[str, str]) -> None:
    with command(["worker", "--yes"], {**indexed, **CHANGED}) as cli:
        cli.wait_for('"worker.ready"')
        assert cli.stop() == 0, cli.output[-2000:]
    assert "Start re-indexing?" not in cli.output
    events = [json.loads(line) for line in cli.output.splitlines() if line.startswith("{")]
    (change,) = [e for e in events if e["event"] == "index.generation_change"]
    assert change["notes"] == NOTES and change["estimated_cost_usd"] == 0.0


def test_with_nothing_changed_serve_starts_unattended(indexed: dict[str, str]) -> None:
    with command(["serve", "--port", free_port()], indexed) as cli:
        cli.wait_for('"app.started"')
        # uvicorn shuts down, then re-raises the signal it caught
        assert cli.stop() in (0, -signal.SIGTERM), cli.output[-2000:]
    assert '"Application shutdown complete."' in cli.output
    assert "index.generation_change" not in cli.output
    untouched(indexed)
