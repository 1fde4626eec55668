"""Grouping consecutive pieces into chunks: balanced, bounded, linear time.

Pieces are given by their boundaries `points[0] < … < points[n]` and the estimated token
position `toks[k]` of each boundary (non-decreasing), so a group i..j costs
`toks[j] - toks[i]` and every query is a binary search, never a sum over pieces.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from math import ceil

import numpy as np

# A cut may move this share of a group's size away from the balanced position to land
# where the text changes topic, at a cost of COHESION_DRIFT_COST per group size moved
# (cohesion runs from 0 to 1). Why these values: docs/decisions/0006-cohesive-cuts.md.
COHESION_REACH = 0.5
COHESION_DRIFT_COST = 0.5
# The default target as a share of the limit: limit / (1 + COHESION_REACH), the largest
# ideal size from which a cut can still move the full reach later without passing the limit.
DEFAULT_TARGET_SHARE = 1 / (1 + COHESION_REACH)

# Cohesion values at cell boundaries and the cell size in tokens (`cohesion.Cohesion.cells`),
# asked for on the first cut that needs them: position t reads values[(t + grid // 2) // grid].
Cells = tuple[list[float], int]
Cohesion = Callable[[], Cells | None]


def group_count(total: int, limit: int, target: int) -> int:
    """How many groups a run of `total` tokens is cut into: as close to `target` tokens
    each as whole groups allow (total / target, rounded), but never fewer than the hard
    `limit` needs (ceil(total / limit)); 1 when the run fits and is under 1.5 × target."""
    return max(ceil(total / limit), int(total / target + 0.5), 1)


def pack(
    toks: list[int],
    limit: int,
    target: int | None = None,
    cohesion: Cohesion | None = None,
) -> list[tuple[int, int]]:
    """Group pieces 0..n-1 (boundaries `toks`, length n+1) into consecutive ranges (i, j).

    Every range costs ≤ `limit`, except a single piece that alone exceeds it (the caller
    refines or keeps such a piece whole). Between two oversized pieces the run of pieces
    is cut into `group_count` groups of about total / n each, each cut snapped to the piece
    boundary nearest the ideal position: greedy filling would instead leave a small,
    context-poor tail. `target` (default and at most `limit`) is the size aimed at: the
    limit stays the hard bound (a piece up to it is never cut), the target only decides
    how many groups a run becomes, so group sizes do not swing between limit / 2 and
    limit with the run's length.

    `cohesion()` gives the lexical cohesion of the note's token positions (`Cells`, asked
    for on the first cut of a run); each cut then goes to the boundary within
    COHESION_REACH of a group's size from the ideal position that minimises cohesion plus
    COHESION_DRIFT_COST × the distance moved (in group sizes), still within the limit.
    """
    n = len(toks) - 1
    if n <= 0:
        return []
    target = limit if target is None else min(max(1, target), limit)
    if n < 64:  # numpy's fixed cost per call exceeds a Python loop over a few pieces
        oversized = [k for k in range(n) if toks[k + 1] - toks[k] > limit]
    else:
        diffs = np.diff(np.asarray(toks, dtype=np.int64))
        oversized = np.flatnonzero(diffs > limit).tolist()
    groups: list[tuple[int, int]] = []
    cells: Cells | None = None
    i = 0
    while i < n:
        k = bisect_left(oversized, i)
        run_end = oversized[k] if k < len(oversized) else n
        if run_end == i:
            groups.append((i, i + 1))
            i += 1
            continue
        t0 = toks[i]
        remaining = toks[run_end] - t0
        count = group_count(remaining, limit, target)
        if count == 1:
            groups.append((i, run_end))
            i = run_end
            continue
        ideal = t0 + remaining / count
        # Furthest boundary still within the limit; at least i + 1 (piece i fits alone).
        j_max = max(bisect_right(toks, t0 + limit, i + 1, run_end + 1) - 1, i + 1)
        j = bisect_left(toks, ideal, i + 1, j_max + 1)
        if j > j_max:
            j = j_max
        elif j > i + 1 and toks[j] - ideal > ideal - toks[j - 1]:
            j -= 1
        if cohesion is not None and cells is None:
            cells = cohesion()
            if cells is None:  # a tokenizer without ids: nearest-boundary cuts
                cohesion = None
        if cells is not None:
            j = _cohesive_cut(
                toks, cells, ideal, remaining / count, t0 + limit, (i + 1, run_end), j
            )
        groups.append((i, j))
        i = j
    return groups


def _cohesive_cut(
    toks: list[int],
    cells: Cells,
    ideal: float,
    size: float,
    cap: int,
    between: tuple[int, int],
    j: int,
) -> int:
    """The boundary with index in [`between`], within COHESION_REACH × size of `ideal` and
    at most `cap`, with the least cohesion + drift cost; `j` (the nearest boundary) on a
    tie, or when no boundary is in reach.

    The reach is the same on both sides: where the limit leaves less room above the ideal
    than below it, cuts would otherwise drift early on average and make more, smaller
    pieces than `group_count` planned. A target of 2/3 of the limit leaves the full reach
    (`DEFAULT_TARGET_SHARE`); a target at the limit leaves none (the cut is the nearest)."""
    reach = min(COHESION_REACH * size, cap - ideal)
    if reach <= 0:
        return j
    values, grid = cells
    half, last = grid // 2, len(values) - 1
    lo, hi = between
    drift = COHESION_DRIFT_COST / size
    best, best_cost = j, float("inf")
    for c in range(bisect_left(toks, ideal - reach, lo, hi + 1), hi + 1):
        t = toks[c]
        if t > ideal + reach:
            break
        cost = values[min((t + half) // grid, last)] + drift * abs(t - ideal)
        if cost < best_cost or (c == j and cost <= best_cost):  # ties go to the nearest
            best, best_cost = c, cost
    return best
