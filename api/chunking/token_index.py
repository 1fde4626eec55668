"""Token positions of a whole note from ONE tokenizer pass, and exact counts of its slices.

A span's estimate is two binary searches over the tokens' byte ends. For cl100k_base and
o200k_base a slice's exact count is the in-context count between its first and last
universal boundary (`universal_boundaries`) plus the direct counts of its short edges; other
tokenizers count the slices in one batch.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Callable, Sequence

import numpy as np

from api.chunking.cohesion import Cohesion, word_tokens
from api.chunking.text import SourceText
from api.tokenizer.encoders import (
    HuggingFaceTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    long_whitespace_runs,
)

# Encodings whose pre-tokeniser has the boundary property (`universal_boundaries`).
_BOUNDARY_ENCODINGS = frozenset({"tiktoken:cl100k_base", "tiktoken:o200k_base"})
# Whole-note numpy passes run in blocks of this many bytes, so a block's temporaries stay in
# the CPU cache.
_SCAN_BLOCK = 1 << 16


class TokenIndex:
    """Token positions in one note's text (see module docstring)."""

    __slots__ = (
        "_barriers", "_cohesion", "_ends", "_ends_list", "_ids", "_ratio", "_runs", "_safe",
        "src", "tokenizer", "total",
    )  # fmt: skip

    def __init__(self, tokenizer: Tokenizer, src: SourceText) -> None:
        self.tokenizer = tokenizer
        self.src = src
        self._safe: np.ndarray | None = None
        # Byte ranges of whitespace runs tiktoken was given in segments: a span over one is
        # counted on its own, since its in-context count depends on where the note was cut.
        self._runs: tuple[np.ndarray, np.ndarray] | None = None
        self._ratio = 0.0
        self._cohesion: Cohesion | None = None
        self._barriers: Callable[[], Sequence[int]] | None = None
        ids: np.ndarray | None = None
        ends: np.ndarray | None = None
        if isinstance(tokenizer, TiktokenTokenizer):
            runs = long_whitespace_runs(src.text)
            if runs:
                bounds = src.byte_offsets(np.array(runs, dtype=np.int64).ravel())
                self._runs = (bounds[0::2], bounds[1::2])
            ids = tokenizer.encode_array(src.text)
            ends = np.cumsum(tokenizer.byte_lengths[ids])
            if tokenizer.name in _BOUNDARY_ENCODINGS and len(src.arr) > 1:
                self._safe = universal_boundaries(src.arr)
        elif isinstance(tokenizer, HuggingFaceTokenizer):
            ids, char_ends = tokenizer.ids_and_char_ends(src.text)
            ends = src.byte_offsets(char_ends)
        self._ids = ids  # kept for `cohesion` (None: a tokenizer without ids or positions)
        self._ends = ends
        if ends is None:
            # Unknown tokenizer: estimates scale with bytes; exact counts stay exact.
            self.total = tokenizer.count(src.text) if len(src) else 0
            self._ratio = self.total / max(len(src), 1)
        else:
            self.total = len(ends)
        # bisect reads an int64 array.array almost as fast as a list, and it is a copy of
        # the buffer where `tolist()` makes one Python int per token (3-4 ms per 720 KB).
        self._ends_list = array("q")
        if ends is not None:
            self._ends_list.frombytes(np.ascontiguousarray(ends, dtype=np.int64).view(np.uint8))

    def set_barriers(self, positions: Callable[[], Sequence[int]]) -> None:
        """Byte positions (the note's headings) that `cohesion`'s windows never cross,
        given as a function: they are only needed if some section is split."""
        self._barriers = positions
        self._cohesion = None

    def cohesion(self) -> Cohesion | None:
        """The note's lexical cohesion (`cohesion.Cohesion`, worked out on its first use);
        None when the tokenizer gives no token ids."""
        if self._ids is None or self._ends is None:
            return None
        if self._cohesion is None:
            positions = self._barriers() if self._barriers is not None else ()
            barriers = self.at(positions) if len(positions) else ()
            self._cohesion = Cohesion(self._ids, barriers, words=word_tokens(self.tokenizer))
        return self._cohesion

    def at(self, positions: np.ndarray | Sequence[int]) -> np.ndarray:
        """Estimated number of tokens before each byte position (non-decreasing)."""
        pos = np.asarray(positions, dtype=np.int64)
        if self._ends is None:
            return np.floor(pos * self._ratio).astype(np.int64)
        return np.searchsorted(self._ends, pos, side="right")

    def at1(self, position: int) -> int:
        """`at` for a single position."""
        if self._ends is None:
            return int(position * self._ratio)
        return bisect_right(self._ends_list, position)

    def estimate(self, start: int, end: int) -> int:
        """Estimated tokens in the byte span [start, end)."""
        return self.at1(end) - self.at1(start)

    def position(self, token: int) -> int:
        """Byte offset where token number `token` of the whole text starts (estimate)."""
        if token <= 0:
            return 0
        if self._ends is None:
            return min(len(self.src), int(token / self._ratio)) if self._ratio else len(self.src)
        if token >= len(self._ends):
            return len(self.src)
        return self._ends_list[token - 1]

    def token_cut(self, start: int, end: int, tokens: int) -> int:
        """A character-boundary byte position about `tokens` tokens after `start` (< end)."""
        if self._ends is None:
            pos = start + max(1, int(tokens / self._ratio)) if self._ratio else end
        else:
            k = self.at1(start) + tokens - 1
            pos = self._ends_list[k] if k < len(self._ends_list) else end
        pos = self.src.char_boundary(min(pos, end), forward=True)
        if pos <= start:
            pos = self.src.char_boundary(start + 1, forward=True)
        return min(pos, end)

    def exact(self, spans: Sequence[tuple[int, int]]) -> list[int]:
        """Exact token counts of the texts of byte spans, each tokenised on its own."""
        if not spans:
            return []
        decode = self.src.decode
        if self._safe is None or len(self._safe) == 0 or self._ends is None:
            return self.tokenizer.count_batch([decode(s, e) for s, e in spans])
        starts = np.fromiter((s for s, _ in spans), dtype=np.int64, count=len(spans))
        stops = np.fromiter((e for _, e in spans), dtype=np.int64, count=len(spans))
        safe = self._safe
        i1 = np.searchsorted(safe, starts, side="left")
        i2 = np.searchsorted(safe, stops, side="right") - 1
        q1 = safe[np.minimum(i1, len(safe) - 1)]
        q2 = safe[np.maximum(i2, 0)]
        q1 = np.where(i1 < len(safe), q1, stops)
        q2 = np.where(i2 >= 0, q2, starts)
        inner = (q1 < q2) & (q1 >= starts) & (q2 <= stops)
        if self._runs is not None:
            run_starts, run_ends = self._runs
            k = np.searchsorted(run_ends, starts, side="right")
            over = k < len(run_ends)
            over[over] = run_starts[k[over]] < stops[over]
            inner &= ~over
        middle = np.where(inner, self.at(q2) - self.at(q1), 0)
        texts: list[str] = []
        owners: list[int] = []
        for k, (s, e, ok, a, b) in enumerate(
            zip(
                starts.tolist(),
                stops.tolist(),
                inner.tolist(),
                q1.tolist(),
                q2.tolist(),
                strict=True,
            )
        ):
            if ok:
                if a > s:
                    texts.append(decode(s, a))
                    owners.append(k)
                if e > b:
                    texts.append(decode(b, e))
                    owners.append(k)
            else:
                texts.append(decode(s, e))
                owners.append(k)
        counts = middle.tolist()
        # The edges repeat ("." ends most chunks of prose): each distinct one is encoded once.
        distinct = list(dict.fromkeys(texts))
        known = dict(zip(distinct, self.tokenizer.count_batch(distinct), strict=True))
        for owner, text in zip(owners, texts, strict=True):
            counts[owner] += known[text]
        return counts


def universal_boundaries(arr: np.ndarray, block: int = _SCAN_BLOCK) -> np.ndarray:
    """Offsets p (0 < p < len) that are piece boundaries of the cl100k/o200k pre-tokenisers
    in the whole note AND in every slice containing p, whatever comes before or after:
    - after "\\n", before printable ASCII other than "/" (o200k's punctuation run
      `[\\r\\n/]*` is the one alternative that joins a newline to what follows);
    - after an ASCII letter, before ASCII that is neither a letter nor an apostrophe;
    - after an ASCII digit, before ASCII that is not a digit.
    Found `block` bytes at a time (the rule reads only the byte pair around p); checked
    against direct counts by tests/chunking/test_chunking_tokenizer.py."""
    if len(arr) <= block + 1:
        return _boundaries(arr)
    found = [_boundaries(arr[a : a + block + 1]) + a for a in range(0, len(arr) - 1, block)]
    return np.concatenate(found)


def _boundaries(arr: np.ndarray) -> np.ndarray:
    prev, cur = arr[:-1], arr[1:]
    low_prev, low_cur = prev | 0x20, cur | 0x20
    prev_letter = (low_prev >= 0x61) & (low_prev <= 0x7A)
    cur_letter = (low_cur >= 0x61) & (low_cur <= 0x7A)
    prev_digit = (prev >= 0x30) & (prev <= 0x39)
    cur_digit = (cur >= 0x30) & (cur <= 0x39)
    cur_ascii = cur < 0x80
    line_start = (prev == 10) & (cur >= 0x21) & (cur <= 0x7E) & (cur != 0x2F)
    after_word = prev_letter & cur_ascii & ~cur_letter & (cur != 0x27)
    after_number = prev_digit & cur_ascii & ~cur_digit
    return np.flatnonzero(line_start | after_word | after_number) + 1
