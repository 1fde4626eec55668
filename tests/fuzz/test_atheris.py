"""Coverage-guided fuzzing with atheris (libFuzzer), behind the slow flag:
`pytest -m slow tests/fuzz/test_atheris.py` (AUTONOTE_ATHERIS_SECONDS per target, default
60). Skipped when the optional `atheris` package is not installed (`.[fuzz]` extra)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris")

SECONDS = int(os.environ.get("AUTONOTE_ATHERIS_SECONDS", "60"))
REPO = Path(__file__).resolve().parents[2]


def run_atheris(target: str, seconds: int, artifacts: Path) -> tuple[int, int, str]:
    """Run the harness for `seconds`; returns (exit code, inputs tried, libFuzzer output)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.fuzz.atheris_harness",
            target,
            f"-max_total_time={seconds}",
            f"-artifact_prefix={artifacts}/",
            "-print_final_stats=1",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=seconds + 600,
        check=False,
    )
    output = proc.stdout + proc.stderr
    done = re.search(r"Done (\d+) runs", output)
    runs = int(done.group(1)) if done else 0
    return proc.returncode, runs, output


@pytest.mark.slow
@pytest.mark.timeout(SECONDS * 2 + 600)
@pytest.mark.parametrize("target", ["chunker", "importer"])
def test_atheris_finds_no_crash(target: str, tmp_path: Path) -> None:
    code, runs, output = run_atheris(target, SECONDS, tmp_path)
    assert code == 0, output[-4000:]
    assert runs > 0 and not list(tmp_path.glob("crash-*")) and not list(tmp_path.glob("timeout-*"))
