"""`make bench`: rerun every claim of BENCHMARKS.md, one process each.

Each command writes its section of its area page (docs/benchmarks/) and its rows of the
claims table (see benchmarks/common.py). They run one after another — never in parallel,
since they time things on a 2-core machine. A failing one does not stop the others; the
exit status says whether all succeeded. The one-off studies in benchmarks/investigations/
are not run.

    python -m benchmarks.run_all              # all
    python -m benchmarks.run_all chunking load
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# name → (arguments after the interpreter, extra environment). Order: cheap and
# self-contained first; the long end-to-end runs last.
CLAIMS: dict[str, tuple[list[str], dict[str, str]]] = {
    "chunking": (["-m", "benchmarks.chunking"], {}),
    "chunking_hostile": (["-m", "benchmarks.chunking_hostile"], {}),
    "pasted_images": (["-m", "benchmarks.pasted_images"], {}),
    "chunk_quality": (["-m", "benchmarks.chunk_quality"], {}),
    "indexing": (["-m", "benchmarks.indexing"], {}),
    "indexing_fairness": (["-m", "benchmarks.indexing_fairness"], {}),
    "indexing_turns": (["-m", "benchmarks.indexing_turns"], {}),
    "notes_api": (["-m", "benchmarks.notes_api"], {}),
    "retrieval": (["-m", "benchmarks.retrieval"], {}),
    "retrieval_levers": (["-m", "benchmarks.retrieval_levers"], {}),
    "search_catch_up": (["-m", "benchmarks.search_catch_up"], {}),
    "migration_live": (["-m", "benchmarks.migration_live"], {}),
    "model_switch": (["-m", "benchmarks.model_switch"], {}),
    "fuzz": (
        [
            "-m",
            "tests.fuzz.campaign",
            "--examples",
            "500",
            "--heavy",
            "60",
            "--atheris-seconds",
            "45",
            "--stateful",
            "60",
            "--schema-examples",
            "25",
        ],
        {},
    ),
    "faults": (
        ["-m", "pytest", "tests/faults", "-m", "slow or not slow", "-q"],
        {"AUTONOTE_FAULTS_REPORT": "1"},
    ),
    "load": (["-m", "benchmarks.load"], {}),
}


def main(argv: list[str]) -> int:
    names = argv or list(CLAIMS)
    unknown = [n for n in names if n not in CLAIMS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(CLAIMS)}")
        return 2
    failed = []
    for name in names:
        args, env = CLAIMS[name]
        started = time.monotonic()
        print(f"== {name}: {' '.join(args)}", flush=True)
        code = subprocess.call([sys.executable, *args], cwd=ROOT, env={**os.environ, **env})
        print(f"== {name}: exit {code} after {time.monotonic() - started:.0f}s", flush=True)
        if code != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
