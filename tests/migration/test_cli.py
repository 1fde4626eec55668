"""The command line: `autonote --help` lists `migrate`; bad arguments and bad configuration
exit 2 with a message, before anything touches a database."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from api.cli import app

runner = CliRunner()


def invoke(*args: str, **env: str) -> Any:
    base = {
        "EMBEDDING_PROVIDER": "local",
        "OPENAI_API_KEY": "",
        "LOG_LEVEL": "WARNING",
        "MONGODB_URL": "mongodb://127.0.0.1:1/?directConnection=true",
        "MONGODB_TIMEOUT_MS": "200",
    }
    return runner.invoke(app, ["migrate", *args], env={**base, **env})


def test_help_lists_the_command_and_its_options() -> None:
    top = runner.invoke(app, ["--help"])
    assert top.exit_code == 0 and "migrate" in top.output
    result = runner.invoke(
        app, ["migrate", "--help"], env={"COLUMNS": "250", "TERMINAL_WIDTH": "250"}
    )
    assert result.exit_code == 0
    for option in (
        "--dry-run",
        "--user",
        "--limit",
        "--since",
        "--include-failed",
        "--no-include-failed",
        "--concurrency",
        "--batch-size",
        "--rate-limit-tokens-per-min",
        "--rate-limit-requests-per-min",
        "--lease-s",
        "--progress",
        "--json",
    ):
        assert option in result.output, option


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--user", "alice"), "not a user id"),
        (("--since", "last tuesday"), "not an ISO 8601 date"),
        (("--since", "0001-01-01T00:00:00+05:00"), "outside"),  # was a traceback
        (("--since", "9999-12-31T23:59:59-05:00"), "outside"),
        (("--concurrency", "0"), "--concurrency"),
        (("--batch-size", "0"), "--batch-size"),
        (("--limit", "0"), "--limit"),
        (("--rate-limit-tokens-per-min", "-5"), "--rate-limit-tokens-per-min"),
        (("--progress", "fancy"), "--progress"),
    ],
)
def test_bad_arguments_exit_2(args: tuple[str, ...], message: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert message in result.output


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CHUNKING_MIN_TOKENS": "900"}, "CHUNKING_MIN_TOKENS"),
        ({"EMBEDDING_MODEL": "no-such-model"}, "not available locally"),
        ({"CHUNKING_ENABLED": "false"}, "chunking is disabled"),
        ({}, "cannot use the database"),  # nothing listens on port 1
    ],
)
@pytest.mark.parametrize("dry_run", [True, False])
def test_bad_configuration_exits_2(env: dict[str, str], message: str, dry_run: bool) -> None:
    result = invoke(*(["--dry-run"] if dry_run else []), **env)
    assert result.exit_code == 2, result.output
    assert message in result.output
