"""Chunker fuzz (always on, bounded): arbitrary Unicode, markdown soup and spliced real
documents through every strategy and size — no exception, no input over its time limit, every
invariant of DESIGN §4 (nothing dropped). More examples: AUTONOTE_FUZZ_EXAMPLES, or the
campaign (`python -m tests.fuzz.campaign`)."""

from __future__ import annotations

import os

import pytest

from tests.fuzz.generators import CHUNK_INPUTS
from tests.fuzz.targets import FuzzStats, Hang, chunk_case, fuzz_chunker

EXAMPLES = int(os.environ.get("AUTONOTE_FUZZ_EXAMPLES", "120"))


@pytest.mark.parametrize("source", sorted(CHUNK_INPUTS))
def test_chunker_fuzz(source: str) -> None:
    stats = FuzzStats(f"chunker/{source}")
    fuzz_chunker(source, EXAMPLES, stats)
    assert stats.cases >= EXAMPLES
    assert stats.outcomes["chunks"] > stats.cases // 2, stats.outcomes  # real work was done


def test_time_limit_catches_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-input bound really interrupts a runaway chunker (so "no hang" means something)."""
    import time

    from tests.fuzz import targets

    class Stuck:
        def chunk_note(self, text: str, title: str) -> list:
            while True:
                time.sleep(0.01)

    monkeypatch.setattr(targets, "CHUNK_LIMIT_S", 0.2)
    monkeypatch.setattr(targets, "chunker", lambda *_: Stuck())
    with pytest.raises(Hang):
        chunk_case("text", "t", "hierarchical_markdown", 50, FuzzStats("x"))
