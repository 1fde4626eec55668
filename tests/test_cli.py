"""The `autonote` CLI as operators run it: bad flags and settings exit 2 with a message and
no traceback, stdout carries only the command's output, commands that read a database
refuse a directory that has none, and `worker` honours CHUNKING_ENABLED=false."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pymongo import MongoClient

ROOT = Path(__file__).resolve().parents[1]


def autonote(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "MONGODB_", "AUTONOTE_", "CHUNKING_", "EMBEDDING_"))
    }
    base |= {"PYTHONPATH": str(ROOT), "LOG_JSON": "true", "COLUMNS": "200", **env}
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        cwd=cwd,
        env=base,
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_refused(res: subprocess.CompletedProcess[str], message: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stdout[-500:], res.stderr[-500:])
    assert "Traceback" not in res.stdout + res.stderr
    assert message in res.stdout + res.stderr, res.stdout + res.stderr


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["serve", "--port", "70000"], {}, "--port"),
        (["serve", "--port", "0"], {}, "--port"),
        (["check"], {"MONGODB_URL": "mongodb://db.example:27O17"}, "MONGODB_URL"),
        (["migrate", "--dry-run"], {"MONGODB_URL": "mongodb://db.example:27O17"}, "MONGODB_URL"),
        (["worker"], {"EMBEDDING_MODEL": "text-embedding-3-large"}, "EMBEDDING_MODEL"),
        (["worker"], {"CHUNKING_ENABLED": "false"}, "chunking is disabled"),
        (["users", "create", "   "], {}, "name must"),
        (["eval", "run", "--notes", "/nonexistent.jsonl"], {}, "does not exist"),
        (["eval", "optimize-chunk-size", "5"], {}, "16 to 8191"),
        (["eval", "optimize-chunk-size", "--strategy", "bogus"], {}, "--strategy"),
        (["indexes", "create", "--timeout", "-5"], {}, "--timeout"),
    ],
)
def test_bad_flags_and_settings_exit_2(
    tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    assert_refused(autonote(args, tmp_path, **env), message)
    assert not (tmp_path / ".autonote").exists(), "refused, yet a database was created"


@pytest.mark.parametrize("args", [["check"], ["migrate"], ["migrate", "--dry-run"]])
def test_commands_refuse_a_data_dir_without_a_database(tmp_path: Path, args: list[str]) -> None:
    """A mistyped AUTONOTE_DATA_DIR was checked as a fresh, empty and healthy database
    (exit 0, "result: clean"), created on the way."""
    res = autonote(args, tmp_path, AUTONOTE_DATA_DIR=str(tmp_path / "typo"))
    assert_refused(res, "no database in")
    assert not (tmp_path / "typo").exists()


def test_users_create_prints_only_the_user_and_its_key(
    tmp_path: Path, mongo_url: str, db_name: str
) -> None:
    """`KEY=$(autonote users create bob)`: stdout is the key alone (it held the user line
    too); the user line and logs go to stderr."""
    res = autonote(
        ["users", "create", "  bob "], tmp_path, MONGODB_URL=mongo_url, MONGODB_DB=db_name
    )
    client: MongoClient = MongoClient(mongo_url)
    try:
        assert res.returncode == 0, res.stderr
        user = client[db_name].users.find_one({})
        assert f"user {user['_id']} (bob)" in res.stderr
        assert res.stdout.startswith("an_") and res.stdout.count("\n") == 1, res.stdout
    finally:
        client.drop_database(db_name)
        client.close()


@pytest.mark.parametrize("args", [["users", "create", "eve"], ["indexes", "create"]])
def test_an_unreachable_database_is_one_line_and_exit_2(tmp_path: Path, args: list[str]) -> None:
    """users create and indexes create printed a 277-line traceback and exited 1; check and
    migrate already answered one line and exit 2."""
    res = autonote(args, tmp_path, MONGODB_URL="mongodb://127.0.0.1:1/", MONGODB_TIMEOUT_MS="300")
    assert res.returncode == 2, res.stderr[-500:]
    assert "Traceback" not in res.stderr and "cannot use the database" in res.stderr
    assert res.stdout == ""


def test_eval_run_reports_bad_input_in_one_line(tmp_path: Path) -> None:
    """A malformed dataset, an invalid setting and an unwritable --dump were tracebacks
    (the last after the whole evaluation)."""
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"id": "n1"}\n')
    questions = tmp_path / "q.jsonl"
    questions.write_text("not json\n")
    cases = [
        (["--notes", str(notes), "--questions", str(questions)], {}, "dataset problem"),
        ([], {"CHUNKING_MAX_TOKENS": "abc"}, "CHUNKING_MAX_TOKENS"),
        (["--dump", str(tmp_path / "missing" / "x.jsonl")], {}, "no folder"),
    ]
    for args, env, message in cases:
        res = autonote(["eval", "run", *args], tmp_path, **env)
        assert res.returncode == 2, (args, res.stderr[-400:])
        assert "Traceback" not in res.stderr and message in res.stderr, res.stderr[-400:]
