"""Small helpers every benchmark shares: data locations, fair timing, report sections.

- `chroma_dir()` and `COMMONMARK_SPEC` locate the evaluation data written elsewhere
  (the Chroma corpora and questions; the CommonMark spec).
- `time_interleaved()` times several competitors on the same input in one process:
  round-robin (so machine noise hits all of them alike), GC collected before and disabled
  during each call, median reported. On a shared 2-core machine absolute times drift; ratios
  measured this way in the same run are the numbers to quote.
- `update_section()` rewrites one named section of the benchmark's area page
  (`docs/benchmarks/<area>.md`, see `PAGES`) between `<!-- bench:NAME -->` and
  `<!-- /bench:NAME -->`, leaving other sections and hand-written text alone.
- `update_claims()` rewrites the result, pass/fail, command and date cells of the script's
  own rows of the claims table in BENCHMARKS.md, each delimited inline by
  `<!-- claim:ID -->` and `<!-- /claim:ID -->` (the claim and target cells are written by
  hand).
- `no_network()` makes any socket connection attempt fail loudly (and records it), to prove
  a library really runs offline instead of silently trying a model hub.
"""

from __future__ import annotations

import contextlib
import gc
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS_MD = REPO_ROOT / "BENCHMARKS.md"
DOCS_DIR = REPO_ROOT / "docs" / "benchmarks"
DATA_DIR = REPO_ROOT / "benchmarks" / ".data"
# Where an investigation's full report goes when it is rerun (not committed: the short
# write-up in docs/benchmarks/investigations.md is updated by hand from it).
INVESTIGATIONS_REPORT = DATA_DIR / "investigations.md"

# Section name → area page, for every section a claim's script (or test campaign) writes.
PAGES = {
    "notes_api": "notes-api.md",
    "indexing": "indexing.md",
    "indexing_fairness": "indexing.md",
    "indexing_turns": "indexing.md",
    "chunking": "chunking.md",
    "chunking_hostile": "chunking.md",
    "pasted_images": "chunking.md",
    "retrieval": "retrieval.md",
    "retrieval_levers": "retrieval.md",
    "chunk_quality": "retrieval.md",
    "search_catch_up": "retrieval.md",
    "faults": "faults.md",
    "fuzz": "faults.md",
    "load": "load.md",
    "migration_live": "migration.md",
    "model_switch": "model-switch.md",
}
# Sections of the one-off studies in benchmarks/investigations/ (not run by `make bench`).
INVESTIGATIONS = {
    "chunk_quality_fp32",
    "chunk_quality_holdout",
    "embedding_memory",
    "retrieval_section_scorer",
    "search_deepening",
    "search_note_text",
    "tokenizer_backends",
}

# Libraries that would otherwise try a model hub or a corpus download on first use.
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def chroma_dir() -> Path:
    """The Chroma chunking-evaluation data (`benchmarks/data/chroma`, MIT; see its README)."""
    return REPO_ROOT / "benchmarks" / "data" / "chroma"


COMMONMARK_SPEC = REPO_ROOT / "tests" / "fixtures" / "markdown" / "commonmark_spec.md"


def set_offline_env() -> None:
    """Tell hub-aware libraries not to download (call before importing them)."""
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)


@dataclass(slots=True)
class Timing:
    """Seconds of each repeated run of one competitor: wall clock (`samples`) and the
    process's CPU time over all its threads (`cpu_samples`, same rounds)."""

    name: str
    samples: list[float] = field(default_factory=list)
    cpu_samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def best(self) -> float:
        return min(self.samples)

    def ratio_to(self, other: Timing, *, cpu: bool = False) -> float:
        """Median over rounds of this run's time / `other`'s in the same round (samples of
        `time_interleaved` are aligned by round). Pairing cancels the machine's slow speed
        drift, which a ratio of two medians taken minutes apart does not. `cpu` compares
        CPU time instead of wall-clock time."""
        mine, theirs = (
            (self.cpu_samples, other.cpu_samples) if cpu else (self.samples, other.samples)
        )
        pairs = list(zip(mine, theirs, strict=True))
        return statistics.median(a / b for a, b in pairs)


def _timed_call(fn: Callable[[], Any]) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one call."""
    gc.collect()
    gc.disable()
    try:
        cpu = time.process_time()
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start, time.process_time() - cpu
    finally:
        gc.enable()


def time_interleaved(
    competitors: dict[str, Callable[[], Any]], repeats: int, warmup: int = 1
) -> dict[str, Timing]:
    """Time every competitor `repeats` times, round-robin, after `warmup` untimed rounds.

    The starting competitor rotates each round so none always runs right after a cache-warm
    neighbour. Returns one `Timing` per name (use `.median`).
    """
    names = list(competitors)
    for _ in range(warmup):
        for name in names:
            competitors[name]()
    timings = {name: Timing(name) for name in names}
    # Long-lived objects (imported libraries, inputs) go to the permanent generation, so the
    # collection before each call only walks what the previous call left behind.
    gc.collect()
    gc.freeze()
    try:
        for round_no in range(repeats):
            shift = round_no % len(names)
            for name in names[shift:] + names[:shift]:
                wall, cpu = _timed_call(competitors[name])
                timings[name].samples.append(wall)
                timings[name].cpu_samples.append(cpu)
    finally:
        gc.unfreeze()
    return timings


def repeats_for(size_bytes: int, budget_bytes: int = 4_000_000, lo: int = 3, hi: int = 15) -> int:
    """More repeats for small inputs, fewer for large ones, so each doc costs similar time."""
    return max(lo, min(hi, budget_bytes // max(size_bytes, 1)))


def _cell(value: Any) -> str:
    """A table cell: `str`, pipes escaped, on one line."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A GitHub-flavoured markdown table (cells converted with `str`, pipes escaped)."""
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |"]
    lines.append("|" + "|".join("---" for _ in headers) + "|")
    lines.extend("| " + " | ".join(_cell(v) for v in row) + " |" for row in rows)
    return "\n".join(lines)


def machine_note() -> str:
    """One line describing where and when the numbers were taken."""
    return (
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()} "
        f"{platform.system()}, {os.cpu_count()} logical CPUs shared with other jobs (noisy: "
        f"compare ratios taken in the same run, not absolute times across runs), "
        f"Python {sys.version.split()[0]}."
    )


def code_revision(*paths: str) -> str:
    """Last commit touching `paths` and the checkout's HEAD, flagged if `paths` are dirty."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        last = git("log", "-1", "--format=%h", "--", *paths) if paths else head
        dirty = git("status", "--porcelain", "--", *paths)
    except (OSError, subprocess.CalledProcessError):
        return "unknown revision"
    return f"commit {last} (checkout {head})" + (" + uncommitted changes" if dirty else "")


def page_for(name: str) -> Path:
    """The file that holds section `name`: its area page, or the investigations' report."""
    if name in INVESTIGATIONS:
        return INVESTIGATIONS_REPORT
    try:
        return DOCS_DIR / PAGES[name]
    except KeyError:
        raise KeyError(f"no page for section {name!r}: add it to PAGES") from None


def update_section(name: str, body: str, path: Path | None = None) -> None:
    """Replace (or append) the section `name` of its area page (or of `path`), creating the
    file if needed.

    The section is delimited by `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`; text
    outside the markers (other benchmarks, hand-written notes) is preserved byte for byte.
    """
    path = path or page_for(name)
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{start}\n{body.strip()}\n{end}"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _m: block, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    _write(path, text)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@dataclass(frozen=True, slots=True)
class Claim:
    """This run's figures for one row of the claims table, and whether its target held
    (`passed` None: the row states no target)."""

    id: str
    result: str
    passed: bool | None = None
    note: str = ""  # follows the verdict, e.g. which part failed

    @property
    def verdict(self) -> str:
        word = "—" if self.passed is None else "**PASS**" if self.passed else "**FAIL**"
        return f"{word} {self.note}".strip()


def update_claims(
    claims: list[Claim], command: str, path: Path = BENCHMARKS_MD, day: str | None = None
) -> list[str]:
    """Write each claim's result, verdict, `command` and today's date into its row.

    A row reads `| claim | target | <!-- claim:ID -->result | verdict | command |
    date<!-- /claim:ID --> |`; only the part between the markers changes. Returns the ids
    with no row in the table (reported, not fatal: the run's section is already written).
    """
    text = path.read_text(encoding="utf-8")
    day = day or f"{datetime.now(UTC):%Y-%m-%d}"
    missing = []
    for claim in claims:
        start, end = f"<!-- claim:{claim.id} -->", f"<!-- /claim:{claim.id} -->"
        cells = " | ".join(_cell(c) for c in (claim.result, claim.verdict, f"`{command}`", day))
        pattern = re.compile(re.escape(start) + r"[^\n]*?" + re.escape(end))
        if not pattern.search(text):
            missing.append(claim.id)
            continue
        text = pattern.sub(lambda _m, c=cells, a=start, b=end: f"{a}{c}{b}", text, count=1)
    _write(path, text)
    for claim_id in missing:
        print(f"no row for claim {claim_id!r} in {path.name}: add it by hand", file=sys.stderr)
    return missing


@contextlib.contextmanager
def no_network() -> Iterator[list[str]]:
    """Fail every socket connect / DNS lookup inside the block; yield the attempts seen.

    Libraries that swallow the error and fall back still leave a record, so callers can
    assert the list is empty. Native code that opens sockets without Python's `socket`
    module is not covered.
    """
    attempts: list[str] = []
    real_connect = socket.socket.connect
    real_getaddrinfo = socket.getaddrinfo

    def refuse_connect(sock: socket.socket, address: Any) -> None:
        attempts.append(f"connect {address!r}")
        raise OSError(f"benchmark runs offline: refused connection to {address!r}")

    def refuse_lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append(f"getaddrinfo {host!r}")
        raise socket.gaierror(f"benchmark runs offline: refused lookup of {host!r}")

    socket.socket.connect = refuse_connect  # type: ignore[method-assign]
    socket.getaddrinfo = refuse_lookup  # type: ignore[assignment]
    try:
        yield attempts
    finally:
        socket.socket.connect = real_connect  # type: ignore[method-assign]
        socket.getaddrinfo = real_getaddrinfo
