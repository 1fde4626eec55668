"""The text-level fallbacks: sentences, lines, words and finally tokens (see PROSE/LINES).

Used for a paragraph, HTML block, deeply nested container or table row that is too big on
its own. Every level returns ranges that cover the span exactly (nothing is dropped); a range
still too big is handed to the next, finer level. Prose (PROSE/LINES) is packed towards the
splitter's target size (see `packing.pack`); code and table rows only towards the limit.
"""

from __future__ import annotations

from collections.abc import Callable
from math import ceil
from typing import Any

import numpy as np

from api.chunking.packing import Cells, pack
from api.chunking.pieces import Piece
from api.chunking.text import SourceText
from api.chunking.token_index import TokenIndex

# Prose: sentences that start a line first (paragraph starts in one-line-per-paragraph
# text), then any sentence, then lines, words and tokens.
PROSE = ("sentence_line", "sentence", "line", "word", "token")
LINES = ("line", "sentence", "word", "token")
CODE_LINES = ("line", "word", "token")


class TextSplitter:
    """Text-level splitting of byte spans of one note."""

    def __init__(
        self,
        src: SourceText,
        index: TokenIndex,
        target: int | None = None,
        *,
        share: float = 1.0,
        cohesive: bool = False,
    ) -> None:
        """`target`: the size prose is packed towards; None: `share` of the limit in effect.
        `cohesive`: cuts move to where the text changes topic (`packing.pack`)."""
        self.src = src
        self.index = index
        self.target = target
        self.share = share
        # Worked out on the first cut that asks (`TokenIndex.cohesion`); None: nearest cuts.
        self.cohesion: Callable[[], Cells | None] | None = self._cells if cohesive else None
        self._cuts = {
            "sentence_line": lambda a, b: src.sentence_cuts(a, b, at_line_start=True),
            "sentence": src.sentence_cuts,
            "line": src.line_cuts,
            "word": src.word_cuts,
        }

    def _cells(self) -> Cells | None:
        cohesion = self.index.cohesion()
        return cohesion.cells() if cohesion is not None else None

    def target_for(self, limit: int) -> int | None:
        """The size to aim at for prose under `limit` (None: the limit itself)."""
        if self.target is not None:
            return min(self.target, limit)
        return None if self.share >= 1 else max(1, round(limit * self.share))

    def ranges(
        self,
        a: int,
        b: int,
        limit: int,
        levels: tuple[str, ...],
        target: int | None = None,
    ) -> list[tuple[int, int]]:
        """Consecutive (untrimmed) ranges covering [a, b), each estimated ≤ `limit`, packed
        towards `target` (see `packing.pack`)."""
        for depth, level in enumerate(levels):
            if level == "token":
                break
            cuts = self._cuts[level](a, b)
            if len(cuts) == 0:
                continue
            bounds: list[int] = np.concatenate(([a], cuts, [b])).tolist()
            toks: list[int] = self.index.at(bounds).tolist()
            out: list[tuple[int, int]] = []
            for i, j in pack(toks, limit, target, self.cohesion):
                if j == i + 1 and toks[j] - toks[i] > limit:
                    out.extend(
                        self.ranges(bounds[i], bounds[j], limit, levels[depth + 1 :], target)
                    )
                else:
                    out.append((bounds[i], bounds[j]))
            return out
        return self.token_ranges(a, b, limit)

    def token_ranges(self, a: int, b: int, limit: int) -> list[tuple[int, int]]:
        """Balanced windows of about `limit` tokens, cut on character boundaries."""
        index = self.index
        total = index.estimate(a, b)
        if total <= limit:
            return [(a, b)]
        step = max(1, ceil(total / ceil(total / limit)))
        out: list[tuple[int, int]] = []
        pos = a
        while pos < b:
            if index.estimate(pos, b) <= limit:
                out.append((pos, b))
                break
            cut = index.token_cut(pos, b, step)
            out.append((pos, cut))
            pos = cut
        return out

    def text(
        self,
        a: int,
        b: int,
        limit: int,
        levels: tuple[str, ...] | None,
        kind: str,
        meta: dict[str, Any] | None = None,
    ) -> list[Piece]:
        """Trimmed pieces for [a, b) split at text level (`levels`, LINES by default)."""
        levels = LINES if levels is None else levels
        target = self.target_for(limit) if levels in (PROSE, LINES) else None
        pieces: list[Piece] = []
        for lo, hi in self.ranges(a, b, limit, levels, target):
            s, e = self.src.trim(lo, hi)
            if s >= e:
                continue
            pieces.append(
                Piece(
                    s,
                    e,
                    kind,
                    limit,
                    self.index.estimate(s, e),
                    meta=dict(meta or {}),
                    redo=lambda n, lo=lo, hi=hi: self.text(lo, hi, n, levels, kind, meta),
                )
            )
        return pieces
