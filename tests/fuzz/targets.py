"""Fuzz targets shared by the pytest runs (bounded, always on) and the longer campaign
(`python -m tests.fuzz.campaign`): each takes one generated input, runs the code under test
with a per-input time limit, checks what must hold, and records the case in `FuzzStats`.

- `chunk_case`: any strategy, any text → no exception, no hang, every DESIGN §4 invariant
  (the chunker tests' own checker: offsets, coverage — no lost content —, token limits).
- `import_case`: `convert_file` on any bytes → a note, or `ImportFileError` with a known
  code; any other exception escapes (and fails the run).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
import typing
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache

from hypothesis import HealthCheck, given, settings

from api.chunking import get_chunker
from api.chunking.strategies import Chunker
from api.chunking.text import sanitize
from api.importing import ImportErrorCode, ImportFileError, convert_file
from tests.chunking.chunk_invariants import check_chunks
from tests.fuzz.generators import CHUNK_INPUTS, IMPORT_INPUTS, chunk_params, chunk_titles

CHUNK_LIMIT_S = 10.0  # per input (inputs are at most tens of KB; typical time is ms)
IMPORT_LIMIT_S = 20.0  # per file (a 140 KB PDF converts in ~0.5 s on an idle machine)
IMPORT_MAX_BYTES = 2_000_000
KNOWN_CODES = frozenset(typing.get_args(ImportErrorCode))
# libFuzzer owns SIGALRM for its own -timeout; the atheris harness turns ours off.
USE_ALARM = True


class Hang(AssertionError):
    """An input took longer than its time limit (reported as a failure, not a skip)."""


@contextlib.contextmanager
def time_limit(seconds: float, what: str) -> Iterator[None]:
    """Interrupt the block with `Hang` after `seconds` (SIGALRM: main thread only; native
    code is interrupted when it returns to Python). Elsewhere the block runs unbounded and
    the caller's elapsed-time check still catches slow inputs afterwards."""
    if not USE_ALARM or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(_signum: int, _frame: object) -> None:
        raise Hang(f"{what}: no result after {seconds}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class FuzzStats:
    """Cases tried, outcomes, and the slowest input of one fuzz target."""

    name: str
    cases: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    slowest_s: float = 0.0
    slowest: str = ""

    def record(self, outcome: str, elapsed_s: float, describe: str) -> None:
        self.cases += 1
        self.outcomes[outcome] += 1
        if elapsed_s > self.slowest_s:
            self.slowest_s, self.slowest = elapsed_s, describe


@cache
def chunker(strategy: str, size: int) -> Chunker:
    return get_chunker(strategy, max_chunk_tokens=size, min_chunk_tokens=min(50, size // 2))


def chunk_case(text: str, title: str, strategy: str, size: int, stats: FuzzStats) -> None:
    """Chunk `text` and check every invariant; `Hang` if it takes over `CHUNK_LIMIT_S`."""
    c = chunker(strategy, size)
    what = f"{strategy}/{size} on {len(text)} chars"
    with time_limit(CHUNK_LIMIT_S, what):
        start = time.perf_counter()
        chunks = c.chunk_note(text, title)
        elapsed = time.perf_counter() - start
    if elapsed > CHUNK_LIMIT_S:
        raise Hang(f"{what}: {elapsed:.1f}s")
    # Lone surrogates are not Unicode: the chunker replaces each by U+FFFD one for one (so
    # offsets still index the original); the invariants hold against that text.
    check_chunks(chunks, sanitize(text), sanitize(title), c)
    for chunk in chunks:
        json.dumps(chunk.to_dict(), ensure_ascii=False).encode("utf-8")  # storable as BSON/JSON
    stats.record("chunks" if chunks else "empty", elapsed, what)


def import_case(
    filename: str, data: bytes, stats: FuzzStats, max_bytes: int = IMPORT_MAX_BYTES
) -> str:
    """Convert one file; only `ImportFileError` (with a known code) may come out of it.
    Returns the outcome: "imported" or the error code."""
    what = f"{filename} ({len(data)} bytes)"
    with time_limit(IMPORT_LIMIT_S, what):
        start = time.perf_counter()
        try:
            note = convert_file(filename, data, max_bytes=max_bytes)
        except ImportFileError as exc:
            outcome = exc.code
            assert exc.code in KNOWN_CODES, exc.code
            assert exc.detail and isinstance(exc.detail, str)
        else:
            outcome = "imported"
            assert isinstance(note.title, str) and note.title.strip(), note.title
            assert isinstance(note.content_md, str) and note.content_md.strip()
            assert all(isinstance(t, str) and t for t in note.tags), note.tags
        elapsed = time.perf_counter() - start
    if elapsed > IMPORT_LIMIT_S:
        raise Hang(f"{what}: {elapsed:.1f}s")
    stats.record(outcome, elapsed, what)
    return outcome


def record_stats(record: dict[str, object]) -> None:
    """Append a figure for the campaign report (`campaign.py` sets AUTONOTE_FUZZ_STATS)."""
    path = os.environ.get("AUTONOTE_FUZZ_STATS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def _fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,  # the per-input `time_limit` bounds time; a deadline flakes under load
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )


def fuzz_chunker(source: str, examples: int, stats: FuzzStats) -> None:
    """`examples` generated inputs from `generators.CHUNK_INPUTS[source]`, each through a
    random strategy and size (hypothesis shrinks and re-raises the first failure)."""

    @_fuzz_settings(examples)
    @given(text=CHUNK_INPUTS[source], title=chunk_titles, params=chunk_params)
    def run(text: str, title: str, params: tuple[str, int]) -> None:
        chunk_case(text, title, *params, stats=stats)

    run()


def fuzz_importer(source: str, examples: int, stats: FuzzStats) -> None:
    """`examples` generated files from `generators.IMPORT_INPUTS[source]`."""

    @_fuzz_settings(examples)
    @given(case=IMPORT_INPUTS[source])
    def run(case: tuple[str, bytes]) -> None:
        import_case(*case, stats=stats)

    run()
