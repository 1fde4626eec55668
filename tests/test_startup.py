"""A configuration that cannot work on this deployment stops `autonote serve` with one line
naming the fix, not a traceback."""

from __future__ import annotations

from pathlib import Path

from tests.test_cli import autonote


def test_atlas_search_on_a_server_without_it_is_one_line(
    tmp_path: Path, mongo_url: str, db_name: str
) -> None:
    res = autonote(
        ["serve"],
        tmp_path,
        MONGODB_URL=mongo_url,
        MONGODB_DB=db_name,
        SEARCH_BACKEND="atlas",
        AUTONOTE_CREATE_DEFAULT_USER="false",
    )
    output = res.stdout + res.stderr
    assert res.returncode != 0, output[-2000:]
    assert "Traceback" not in output, output[-2000:]
    failed = [line for line in output.splitlines() if "app.startup_failed" in line]
    assert len(failed) == 1 and "has no Atlas Search" in failed[0], output[-2000:]
