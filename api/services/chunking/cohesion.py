"""Lexical cohesion at candidate cuts: where the text of a split section changes topic.

When a section must be split, `packing.pack` picks each cut among the unit boundaries
(paragraphs, sentences, ...) near the position that balances the pieces. Of two boundaries
about equally near, the better cut is the one where the text on either side shares the
fewest informative words: the lexical-cohesion signal of TextTiling (Hearst, 1997). A piece
that keeps one topic together embeds closer to questions about it than one that straddles
two (`benchmarks/chunk_quality.py` measures the effect on retrieval).

The signal comes from the token ids of the one tokenizer pass the chunker already made (no
second tokenisation, no word lists, no model): the cohesion at token position t is the
cosine similarity of the sets of token ids in the `window` tokens before t and in the
`window` tokens after it, both windows clipped to the text being split, each id weighted by
its inverse frequency in the note. Ids that make up more than `MAX_SHARE` of the note
(punctuation, function words) are left out: they carry no topic (in a short note, only
those that also occur more than `MIN_KEPT` times).

Sets rather than counts keep it exact in linear time, whatever the text: an id is in both
windows of t exactly when two consecutive occurrences of it straddle t closely enough, so
each occurrence adds its weight to one range of positions per window (difference arrays),
and a word repeated a thousand times costs a thousand ranges, not a million pairs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

WINDOW = 96  # tokens on each side of a cut (~70 words: a few sentences)
MAX_SHARE = 0.01  # ids more frequent than this share of the note's tokens are ignored,
MIN_KEPT = 8  # unless they occur at most this often (in a short note every word is "1 %")


class Cohesion:
    """Similarity across token positions of one note (see module docstring)."""

    __slots__ = ("_ids", "_positions", "_weights", "window")

    def __init__(self, ids: np.ndarray, window: int = WINDOW) -> None:
        """`ids`: the note's token ids in order (any non-negative integers)."""
        self.window = max(1, window)
        ids = np.asarray(ids, dtype=np.int64)
        n = len(ids)
        if n == 0:
            self._positions = self._ids = np.zeros(0, dtype=np.int64)
            self._weights = np.zeros(0, dtype=np.float64)
            return
        _, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
        freq = counts[inverse]
        kept = np.flatnonzero(freq <= max(MIN_KEPT, n * MAX_SHARE))
        self._positions = kept
        self._ids = inverse[kept]
        # Squared inverse frequency: what one id present on both sides adds to the dot product.
        self._weights = np.log(n / freq[kept]) ** 2

    def similarity(self, positions: Sequence[int]) -> list[float]:
        """Cohesion (0: nothing shared … 1: the same ids) at each of the sorted token
        positions `positions`, both windows clipped to [positions[0], positions[-1])."""
        if len(positions) == 0:
            return []
        lo, hi = int(positions[0]), int(positions[-1])
        a, b = np.searchsorted(self._positions, (lo, hi))
        if hi <= lo or b <= a:
            return [0.0] * len(positions)
        pos, ids, w = self._positions[a:b], self._ids[a:b], self._weights[a:b]
        order = np.lexsort((pos, ids))  # each id's occurrences, in text order
        p, v, w = pos[order], ids[order], w[order]
        same = v[1:] == v[:-1]
        far = np.iinfo(np.int64).max // 4
        # The next and the previous occurrence of the same id (far away when there is none).
        nxt = np.append(np.where(same, p[1:], far), far)
        prv = np.insert(np.where(same, p[:-1], -far), 0, -far)
        width = self.window
        span = hi - lo + 2
        left, right, both = np.zeros(span), np.zeros(span), np.zeros(span)
        # In the window before t: from just after an occurrence until W later, or until the
        # next occurrence takes over. In the window after t: from W before an occurrence
        # (or just after the previous one) until it. In both: between two consecutive
        # occurrences close enough that each window holds one.
        _add_ranges(left, p + 1, np.minimum(p + width, nxt), w, lo, hi)
        _add_ranges(right, np.maximum(p - width + 1, prv + 1), p, w, lo, hi)
        q, wq = nxt[:-1][same], w[:-1][same]
        first = p[:-1][same]
        _add_ranges(
            both, np.maximum(first + 1, q - width + 1), np.minimum(first + width, q), wq, lo, hi
        )
        at = np.asarray(positions, dtype=np.int64) - lo
        # Cumulated differences leave round-off where the true value is 0: anything below
        # a billionth of the total weight is read as nothing shared / an empty window.
        eps = 1e-9 * max(1.0, float(w.sum()))
        num, left_sq, right_sq = (np.cumsum(acc)[at] for acc in (both, left, right))
        num[num < eps] = 0.0
        den = np.sqrt(np.where((left_sq < eps) | (right_sq < eps), 0.0, left_sq * right_sq))
        sim = np.divide(num, den, out=np.zeros(len(at)), where=den > 0)
        return np.minimum(sim, 1.0).tolist()


def _add_ranges(
    acc: np.ndarray, first: np.ndarray, last: np.ndarray, w: np.ndarray, lo: int, hi: int
) -> None:
    """Add w[i] to acc[t - lo] for every t in [first[i], last[i]] ∩ [lo, hi] (as a
    difference array: `acc` is cumulated afterwards)."""
    first = np.maximum(first, lo)
    last = np.minimum(last, hi)
    ok = first <= last
    if not ok.any():
        return
    size = len(acc)
    acc += np.bincount(first[ok] - lo, weights=w[ok], minlength=size)[:size]
    acc -= np.bincount(last[ok] - lo + 1, weights=w[ok], minlength=size)[:size]
