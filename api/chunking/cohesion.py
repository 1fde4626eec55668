"""Lexical cohesion at candidate cuts: where the text of a split section changes topic.

At token position t: the cosine of the inverse-frequency-weighted sets of word tokens in the
`window` tokens before and after t, neither window crossing a heading; exact and linear in
time (docs/chunking.md; tests/chunking/test_chunking_cohesion.py spells out the definition).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

WINDOW = 96  # tokens on each side of a cut (~70 words: a few sentences)
MAX_SHARE = 0.01  # word tokens more frequent than this share of the note's tokens are ignored,
MIN_KEPT = 8  # unless they occur at most this often (in a short note every word is "1 %")
GRID = 4  # tokens per cell: a cut 1-2 tokens off moves no window noticeably, and a quarter
# of the positions is a quarter of the work for the note-long passes
_CJK = 0x2E80  # CJK radicals and up: one such character is a word of its own


def is_word(token: str) -> bool:
    """Whether a token's text carries topic: ≥ 3 letters after a leading space or "##"
    (a word-piece continuation), or letters that include a CJK character."""
    text = token[2:] if token.startswith("##") else token.lstrip(" ")
    return text.isalpha() and (len(text) >= 3 or any(ord(ch) >= _CJK for ch in text))


@lru_cache(maxsize=8)
def word_tokens(tokenizer: Any) -> np.ndarray | None:
    """`is_word` for every id of a tiktoken or `tokenizers` vocabulary (bool array, once
    per tokenizer), or None for a tokenizer whose vocabulary is not known."""
    from api.tokenizer.encoders import HuggingFaceTokenizer, TiktokenTokenizer

    entries: Iterable[tuple[int, str]]
    if isinstance(tokenizer, TiktokenTokenizer):
        ranks: dict[bytes, int] = getattr(tokenizer.encoding, "_mergeable_ranks", {})
        entries = ((rank, raw.decode("utf-8", "replace")) for raw, rank in ranks.items())
        size = tokenizer.encoding.n_vocab
    elif isinstance(tokenizer, HuggingFaceTokenizer):
        vocab = tokenizer.backend.get_vocab()
        entries = ((i, token) for token, i in vocab.items())
        size = max(vocab.values(), default=-1) + 1
    else:
        return None
    table = np.zeros(size + 1, dtype=bool)  # the last entry, False, for any id past the end
    for i, text in entries:
        if "\ufffd" not in text and is_word(text):
            table[i] = True
    return table


def _group_by_id(ids: np.ndarray) -> np.ndarray:
    """The stable argsort of non-negative `ids`: equal ids stay in text order.

    Two stable passes over 16-bit halves, low then high: numpy sorts 16-bit keys by radix
    in linear time, where a comparison sort of a combined (id, position) key does not."""
    if len(ids) and int(ids.max()) >> 32:  # no vocabulary is this large; stay correct
        return np.argsort(ids, kind="stable")
    order = np.argsort((ids & 0xFFFF).astype(np.uint16), kind="stable")
    high = (ids >> 16).astype(np.uint16)
    if not high.any():
        return order
    return order[np.argsort(high[order], kind="stable")]


class Cohesion:
    """Similarity across the token positions of one note (see module docstring)."""

    __slots__ = ("_barriers", "_ids", "_list", "_sim", "_words", "grid", "window")

    def __init__(
        self,
        ids: np.ndarray,
        barriers: Sequence[int] = (),
        window: int = WINDOW,
        words: np.ndarray | None = None,
        grid: int = GRID,
    ) -> None:
        """`ids`: the note's token ids in order (non-negative integers); `barriers`: token
        positions no window reaches across (both windows of t hold tokens of t's segment
        only); `words`: which ids are word tokens (`word_tokens`; None: every id is);
        `grid`: the note is read in cells of this many tokens (windows of `window // grid`
        cells, cuts and barriers at the nearest cell boundary)."""
        self.grid = max(1, grid)
        self.window = max(1, window // self.grid)
        self._ids = np.asarray(ids, dtype=np.int64)
        cells = (np.asarray(barriers, dtype=np.int64) + self.grid // 2) // self.grid
        self._barriers = np.unique(cells)
        self._words = words
        self._sim: np.ndarray | None = None
        self._list: list[float] | None = None

    def cells(self) -> tuple[list[float], int]:
        """The values at every cell boundary and the cell size: token position t reads
        values[(t + grid // 2) // grid] (what `packing.pack` looks up near each cut)."""
        if self._list is None:
            self._list = self._values().tolist()
        return self._list, self.grid

    def _values(self) -> np.ndarray:
        if self._sim is None:
            self._sim = self._compute()
        return self._sim

    def _compute(self) -> np.ndarray:
        ids, width, grid = self._ids, self.window, self.grid
        n = len(ids)
        m = -(-n // grid)  # cells; boundaries 0…m
        if n == 0:
            return np.zeros(1)
        freq = np.bincount(ids)[ids]
        kept = freq <= max(MIN_KEPT, n * MAX_SHARE)
        if self._words is not None:  # ids past the table (none should be) read its last entry
            kept &= self._words.take(ids, mode="clip")
        p = np.flatnonzero(kept)  # word tokens, in text order
        if len(p) == 0:
            return np.zeros(m + 1)
        w = np.log(n / freq[p])
        w *= w  # what one word on both sides adds to the dot product
        cell = p // grid
        inner = self._barriers[(self._barriers > 0) & (self._barriers < m)]
        # Boundary j's windows are cells [max(j - W, start of j's segment), j) and [j,
        # min(j + W, end of j's segment)) (at a barrier the left one is empty); as
        # multisets, prefix sums give them.
        mass = np.zeros(m + 1)
        np.cumsum(np.bincount(cell, w, minlength=m)[:m], out=mass[1:])
        bounds = np.concatenate(([0], inner, [m]))
        if len(inner):
            j = np.arange(m + 1)
            # The segment of every boundary 0…m (m: one past the last), by lookup, not search.
            seg_of = np.repeat(np.arange(len(bounds)), np.append(np.diff(bounds), 1))
            left_sq = mass - mass[np.maximum(j - width, bounds[seg_of])]
            right_sq = mass[np.minimum(j + width, bounds[np.minimum(seg_of + 1, len(inner) + 1)])]
            right_sq -= mass
        else:  # one segment: the windows are plain shifts
            left_sq, right_sq = mass.copy(), np.full(m + 1, mass[-1])
            left_sq[width:] -= mass[:-width]
            right_sq[:-width] = mass[width:]
            right_sq -= mass
        # Consecutive occurrences (a, b) of one word in one segment, less than 2W apart.
        order = _group_by_id(ids[p])
        sid = ids[p[order]]
        sc = cell[order]
        gap = sc[1:] - sc[:-1]
        near = (sid[1:] == sid[:-1]) & (gap < 2 * width)
        if len(inner):
            seg = seg_of[sc]
            near &= seg[1:] == seg[:-1]
        pick = np.flatnonzero(near)
        a, b, gap, wp = sc[pick], sc[pick + 1], gap[pick], w[order[pick]]
        # A word in both windows: j in [max(a + 1, b - W + 1), min(a + W, b)]. The sets
        # count a word once: a is not in j's left set once b is (j in [b + 1, a + W]), nor
        # b in its right set while a is (j in [b - W + 1, a]); j in their segment.
        close = np.flatnonzero(gap < width)
        a2, b2, w2 = a[close], b[close], wp[close]
        if len(inner):
            seg2 = seg_of[a2]
            end2, start2 = bounds[seg2 + 1] - 1, bounds[seg2]
        else:
            end2, start2 = m - 1, 0
        size = m + 2
        both_lo = np.maximum(a + 1, b - width + 1)
        both_hi = np.minimum(a + width, b) + 1
        dup_l_hi = np.minimum(a2 + width, end2) + (size + 1)
        dup_r_lo = np.maximum(b2 - width + 1, start2) + 2 * size
        keys = np.concatenate(
            (both_lo, both_hi, b2 + (size + 1), dup_l_hi, dup_r_lo, a2 + (2 * size + 1))
        )
        weights = np.concatenate((wp, -wp, w2, -w2, w2, -w2))
        diff = np.bincount(keys, weights, minlength=3 * size)[: 3 * size]
        both, left_dup, right_dup = np.cumsum(diff.reshape(3, size), axis=1)[:, : m + 1]
        left_sq -= left_dup
        right_sq -= right_dup
        # Cumulated sums leave round-off where the true value is 0: anything below a
        # billionth of the total weight is read as nothing shared / an empty window.
        eps = 1e-9 * max(1.0, float(mass[-1]))
        both[both < eps] = 0.0
        den = left_sq * right_sq
        den[(left_sq < eps) | (right_sq < eps)] = 0.0
        np.sqrt(den, out=den)
        sim = np.divide(both, den, out=np.zeros(m + 1), where=den > 0)
        return np.minimum(sim, 1.0, out=sim)
