"""`make bench`: rerun every benchmark, one process each, and update BENCHMARKS.md.

Each benchmark writes its own section of BENCHMARKS.md (see benchmarks/common.py). They run
one after another — never in parallel, since they time things on a 2-core machine. A failing
benchmark does not stop the others; the exit status says whether all succeeded.

    python -m benchmarks.run_all              # all
    python -m benchmarks.run_all chunking load
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Order: cheap and self-contained first; the long end-to-end runs last.
BENCHMARKS = [
    "chunking",
    "chunking_hostile",
    "pasted_images",
    "chunk_quality",
    "chunk_quality_holdout",
    "embedding_memory",
    "indexing",
    "notes_api",
    "retrieval",
    "retrieval_section_scorer",
    "search_note_text",
    "search_deepening",
    "search_catch_up",
    "migration_live",
    "load",
]


def main(argv: list[str]) -> int:
    names = argv or BENCHMARKS
    unknown = [n for n in names if not (ROOT / "benchmarks" / f"{n}.py").exists()]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
        return 2
    failed = []
    for name in names:
        started = time.monotonic()
        print(f"== benchmarks.{name}", flush=True)
        code = subprocess.call([sys.executable, "-m", f"benchmarks.{name}"], cwd=ROOT)
        print(
            f"== benchmarks.{name}: exit {code} after {time.monotonic() - started:.0f}s", flush=True
        )
        if code != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
