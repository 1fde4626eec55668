"""What the local embedding model keeps in memory, and what giving it back costs.

onnxruntime's CPU memory arena keeps every block it has allocated; with batches padded to a
different width each time, an indexing process stays at the peak of every batch shape. The
local embedder asks for arena shrinkage after each run. This script embeds the same
texts (indexing-sized: 5-180 words, batches of 32) in fresh child processes, with
shrinkage (the default) and without (the arena kept, the baseline), alternating A B B A,
and reports each child's resident memory after every round and its embedding time, as
ratios to the baseline measured in the same run.

Reproduce: `.venv/bin/python -m benchmarks.investigations.embedding_memory` (`--no-write`
to only print; the report goes to benchmarks/.data/investigations.md).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time

from benchmarks.common import (
    code_revision,
    machine_note,
    markdown_table,
    set_offline_env,
    update_section,
)

MODES = ("arena shrunk after each run (default)", "arena kept (baseline)")
_WORDS = (
    "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega backup restore "
    "cluster replica index chunk vector search note heading section table code release"
).split()


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 180))) for _ in range(n)]


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096 / 2**20


def child(mode: str, rounds: int, texts: int) -> dict[str, list[float]]:
    """Embed `rounds` × `texts` texts in this process; RSS after each round and seconds."""
    from connectors.embeddings.local import LocalEmbedder

    embedder = LocalEmbedder()
    embedder.load()
    if mode == MODES[1]:
        embedder._run_options = None  # the baseline: no shrinkage
    rss, seconds = [], []
    for r in range(rounds):
        batch = _texts(texts, r)
        started = time.perf_counter()
        embedder.embed_sync(batch, truncate=True)
        seconds.append(time.perf_counter() - started)
        rss.append(_rss_mb())
    return {"rss": rss, "seconds": seconds}


def measure(rounds: int, texts: int, repeats: int) -> dict[str, list[dict[str, list[float]]]]:
    """Children in A B B A order, `repeats` times."""
    out: dict[str, list[dict[str, list[float]]]] = {m: [] for m in MODES}
    for i in range(repeats):
        for mode in MODES if i % 2 == 0 else reversed(MODES):
            proc = subprocess.run(
                [sys.executable, "-m", "benchmarks.investigations.embedding_memory", "--child",
                 mode, str(rounds), str(texts)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            out[mode].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(mode, out[mode][-1], flush=True)
    return out


def render(results: dict[str, list[dict[str, list[float]]]], rounds: int, texts: int) -> str:
    """The investigation's report."""
    summary = {
        mode: (
            statistics.median(r["rss"][-1] for r in runs),
            statistics.median(max(r["rss"]) for r in runs),
            statistics.median(sum(r["seconds"]) for r in runs),
        )
        for mode, runs in results.items()
    }
    base = summary[MODES[1]]
    rows = [
        [
            mode,
            len(results[mode]),
            f"{rss:.0f}",
            f"{peak:.0f}",
            f"{secs:.1f}",
            f"{rss / base[0]:.2f}×",
            f"{secs / base[2]:.2f}×",
        ]
        for mode, (rss, peak, secs) in summary.items()
    ]
    table = markdown_table(
        [
            "local model",
            "children",
            "RSS after MB",
            "highest RSS MB",
            "embedding s",
            "RSS ÷ baseline",
            "time ÷ baseline",
        ],
        rows,
    )
    revision = code_revision("connectors/embeddings")
    return (
        "## Local embedding model: memory kept after indexing\n\n"
        "Reproduce: `.venv/bin/python -m benchmarks.investigations.embedding_memory`. "
        f"{machine_note()} Code: {revision}.\n\n"
        f"Each child process loads the model and embeds {rounds} rounds of {texts} texts "
        "(5-180 words, batches of 32 sorted by length, as indexing does); RSS is read after "
        "each round; medians over children, alternating A B B A.\n\n"
        f"{table}\n"
    )


def main(argv: list[str] | None = None) -> None:
    """Run the children (or be one), print, and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", nargs=3, metavar=("MODE", "ROUNDS", "TEXTS"))
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--texts", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=2, help="A B (B A) pairs")
    parser.add_argument("--no-write", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    set_offline_env()
    if args.child:
        mode, rounds, texts = args.child
        print(json.dumps(child(mode, int(rounds), int(texts))))
        return
    report = render(measure(args.rounds, args.texts, args.repeats), args.rounds, args.texts)
    print(report)
    if not args.no_write:
        update_section("embedding_memory", report)


if __name__ == "__main__":
    main()
