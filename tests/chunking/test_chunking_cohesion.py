"""Cuts that follow topic shifts: the cohesion signal and how packing uses it."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from api.chunking import MarkdownChunker
from api.chunking.cohesion import MAX_SHARE, MIN_KEPT, Cohesion, _group_by_id
from api.chunking.packing import COHESION_REACH, pack
from tests.chunking.chunk_invariants import check_chunks


def similarity(cohesion: Cohesion, positions: list[int]) -> list[float]:
    """The cohesion at each token position, read from `cells()` as `packing.pack` reads it."""
    values, grid = cohesion.cells()
    return [values[min((t + grid // 2) // grid, len(values) - 1)] for t in positions]


def brute_cells(
    ids: list[int], positions: list[int], window: int, barriers: list[int], grid: int
) -> list[float]:
    """The definition, spelled out: cosine of the inverse-frequency-weighted sets of ids in
    the windows before and after each position, neither crossing a barrier (both hold
    cells of the position's segment only), without ids that make up more than MAX_SHARE of
    all tokens and occur over MIN_KEPT times; the note read in cells of `grid` tokens
    (windows of window // grid cells, positions and barriers at the nearest cell boundary;
    grid 1: tokens)."""
    n = len(ids)
    counts = Counter(ids)
    kept = {i for i, c in counts.items() if c <= max(MIN_KEPT, n * MAX_SHARE)}
    cells = [set(ids[c : c + grid]) & kept for c in range(0, n, grid)]
    width = max(1, window // grid)
    walls = sorted({(b + grid // 2) // grid for b in barriers})

    def segment(c: int) -> int:
        return sum(1 for b in walls if b <= c)

    def weight(i: int) -> float:
        return math.log(n / counts[i]) ** 2

    out = []
    for t in positions:
        j = min((t + grid // 2) // grid, len(cells))
        left = set().union(
            *(cells[c] for c in range(max(0, j - width), j) if segment(c) == segment(j))
        )
        right = set().union(
            *(cells[c] for c in range(j, min(len(cells), j + width)) if segment(c) == segment(j))
        )
        dot = sum(weight(i) for i in left & right)
        norm = math.sqrt(sum(map(weight, left)) * sum(map(weight, right)))
        out.append(min(1.0, dot / norm) if norm else 0.0)
    return out


@settings(max_examples=300, deadline=None)
@given(
    ids=st.lists(st.integers(0, 60), min_size=1, max_size=300),
    window=st.integers(1, 40),
    picks=st.lists(st.integers(0, 300), min_size=1, max_size=12),
    cuts=st.lists(st.integers(0, 300), max_size=4),
)
def test_similarity_is_the_windowed_cosine(
    ids: list[int], window: int, picks: list[int], cuts: list[int]
) -> None:
    positions = sorted({min(p, len(ids)) for p in picks})
    barriers = sorted({min(c, len(ids)) for c in cuts})
    got = similarity(Cohesion(np.array(ids), barriers, window=window, grid=1), positions)
    want = brute_cells(ids, positions, window, barriers, grid=1)
    assert np.allclose(got, want, atol=1e-9), (got, want)
    assert all(0.0 <= x <= 1.0 for x in got)


@settings(max_examples=200, deadline=None)
@given(
    ids=st.lists(st.integers(0, 40), min_size=1, max_size=300),
    window=st.integers(1, 40),
    grid=st.integers(2, 6),
    picks=st.lists(st.integers(0, 300), min_size=1, max_size=12),
    cuts=st.lists(st.integers(0, 300), max_size=4),
)
def test_the_grid_reads_the_note_in_cells(
    ids: list[int], window: int, grid: int, picks: list[int], cuts: list[int]
) -> None:
    positions = sorted({min(p, len(ids)) for p in picks})
    barriers = sorted({min(c, len(ids)) for c in cuts})
    cohesion = Cohesion(np.array(ids), barriers, window=window, grid=grid)
    want = brute_cells(ids, positions, window, barriers, grid)
    assert np.allclose(similarity(cohesion, positions), want, atol=1e-9)
    values, cell = cohesion.cells()
    looked_up = [values[min((t + cell // 2) // cell, len(values) - 1)] for t in positions]
    assert cell == grid and np.allclose(looked_up, want, atol=1e-9)


@settings(max_examples=300, deadline=None)
@given(
    ids=st.lists(
        st.one_of(
            st.integers(0, 5),
            st.integers(65_530, 65_541),  # either side of the 16-bit halves' seam
            st.integers(100_000, 200_020),  # cl100k / o200k sized vocabularies
            st.integers(2**32 - 2, 2**32 + 2),  # past what the radix passes cover
        ),
        max_size=200,
    )
)
def test_occurrences_are_grouped_by_id_in_text_order(ids: list[int]) -> None:
    arr = np.array(ids, dtype=np.int64)
    assert _group_by_id(arr).tolist() == np.argsort(arr, kind="stable").tolist()


def test_similarity_is_low_where_the_vocabulary_changes() -> None:
    rng = np.random.default_rng(7)
    first = rng.integers(1000, 1040, 400)  # one topic's words, repeated
    second = rng.integers(2000, 2040, 400)  # another topic's
    cohesion = Cohesion(np.concatenate([first, second]), window=64)
    inside_a, shift, inside_b = similarity(cohesion, [0, 200, 400, 600, 800])[1:4]
    assert shift == 0.0
    assert inside_a > 0.5 and inside_b > 0.5


def test_degenerate_inputs() -> None:
    assert similarity(Cohesion(np.zeros(0, dtype=np.int64)), []) == []
    assert similarity(Cohesion(np.zeros(0, dtype=np.int64)), [0]) == [0.0]
    assert similarity(Cohesion(np.array([5, 5, 5])), [1, 1, 3]) == [0.0, 0.0, 0.0]  # no idf
    # every id far above MAX_SHARE and MIN_KEPT: nothing is kept, nothing is shared
    assert similarity(Cohesion(np.array([1, 2] * 500)), [0, 500, 1000]) == [0.0, 0.0, 0.0]
    assert np.allclose(similarity(Cohesion(np.array([1, 2] * 4)), [0, 4, 8]), [0.0, 1.0, 0.0])


def test_dense_repeats_are_exact_and_linear() -> None:
    """150 ids, each in one run of 1/150 of a 600 000-token note (under MAX_SHARE each):
    the pairwise form of the measure would pair every token with its 191 neighbours; the
    set form adds one range per occurrence and window. Inside a run both windows hold the
    same single id (cohesion 1); where two runs meet they share nothing (0)."""
    ids = np.repeat(np.arange(150, dtype=np.int64), 4000)
    values = similarity(Cohesion(ids), [0, 2000, 4000, 6000, len(ids)])
    assert np.allclose(values, [0.0, 1.0, 0.0, 1.0, 0.0])


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 120), min_size=1, max_size=150),
    limit=st.integers(1, 150),
    frac=st.floats(0.05, 1.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_pack_with_cohesion_keeps_every_packing_rule(
    sizes: list[int], limit: int, frac: float, seed: int
) -> None:
    """Whatever the scores: consecutive groups covering every piece, each within the limit
    (a lone oversized piece aside); with all scores equal the cuts are exactly the nearest
    boundaries."""
    toks = [0, *itertools.accumulate(sizes)]
    target = max(1, int(frac * limit))
    rng = np.random.default_rng(seed)
    scores = rng.random(toks[-1] + 1).tolist()  # one per token position (grid 1)
    groups = pack(toks, limit, target, lambda: (scores, 1))
    assert [g[0] for g in groups] == [0, *(g[1] for g in groups[:-1])]
    assert groups[-1][1] == len(sizes)
    for i, j in groups:
        assert j > i
        assert toks[j] - toks[i] <= limit or j == i + 1
    assert pack(toks, limit, target, lambda: ([0.5] * len(scores), 1)) == pack(toks, limit, target)
    assert pack(toks, limit, target, lambda: None) == pack(toks, limit, target)


def test_the_cut_moves_to_the_least_cohesive_boundary_within_reach() -> None:
    # Ten pieces of 10 tokens, limit 60, target 40: three groups, the first cut ideally at
    # 33.3 (nearest boundary 30), and a reach of half a group (16.7 tokens) either way.
    toks = list(range(0, 101, 10))
    assert pack(toks, 60, 40)[0] == (0, 3)

    def shift_at(position: int) -> Callable[[], tuple[list[float], int]]:
        return lambda: ([0.0 if t == position else 1.0 for t in range(101)], 1)

    assert pack(toks, 60, 40, shift_at(50))[0] == (0, 5)  # a topic shift within reach
    assert pack(toks, 60, 40, shift_at(10))[0] == (0, 3)  # out of reach: not taken
    # With the target at the limit there is no room above the ideal, so none below either.
    assert pack(toks, 60, 60, shift_at(50)) == pack(toks, 60, 60)
    assert COHESION_REACH == 0.5


def _paragraphs(words: list[str], count: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(words, 24).tolist()).capitalize() + "." for _ in range(count)]


COOKING = (
    "onion garlic simmer saucepan butter flour roux stock whisk season thyme oven roast "
    "pepper salt broth knead dough yeast bake skillet saute braise ladle colander zest "
    "lemon basil parsley"
).split()
ASTRONOMY = (
    "telescope orbit comet nebula parallax redshift galaxy pulsar aperture eclipse "
    "asteroid meteor quasar supernova spectrum planet lunar solar crater eyepiece "
    "magnitude zenith equinox cluster dwarf"
).split()


def test_a_long_section_is_cut_where_its_topic_changes() -> None:
    """Three paragraphs on one topic, four on another, one section of ~8 paragraphs' worth:
    the balanced cut falls inside the second topic, the cohesive cut between the two."""
    paras = _paragraphs(COOKING, 3, 1) + _paragraphs(ASTRONOMY, 4, 2)
    text = "## Notes\n\n" + "\n\n".join(paras) + "\n"
    shift = text.index(paras[3])
    sizes = [MarkdownChunker().tokenizer.count(p) for p in paras]
    limit = int(sum(sizes) * 0.72)
    cohesive = MarkdownChunker(max_chunk_tokens=limit, min_chunk_tokens=0)
    nearest = MarkdownChunker(max_chunk_tokens=limit, min_chunk_tokens=0, cohesive_cuts=False)
    by_topic = cohesive.chunk_note(text, "T")
    check_chunks(by_topic, text, "T", cohesive)
    assert [c.start_offset for c in by_topic][1] == shift
    plain = nearest.chunk_note(text, "T")
    check_chunks(plain, text, "T", nearest)
    assert [c.start_offset for c in plain][1] != shift
    assert len(plain) == len(by_topic) == 2
    assert nearest.version.endswith(":nearest-cuts") and cohesive.version != nearest.version
