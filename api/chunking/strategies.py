"""The chunking strategies behind `CHUNKING_STRATEGY`, and the factory that picks one.

`hierarchical_markdown` (default: `MarkdownChunker`), `fixed_tokens` (the legacy sliding
window, whose windows overlap) and `whole_note`: docs/chunking.md, *Strategies*.
"""

from __future__ import annotations

from typing import Literal, Protocol, get_args, runtime_checkable

from api.chunking.finish import settle
from api.chunking.markdown import ChunkerBase, MarkdownChunker, clean_title
from api.chunking.pieces import Piece
from api.chunking.split import Splitter
from api.chunking.token_index import TokenIndex
from api.chunking.types import MarkdownChunk
from api.tokenizer.encoders import Tokenizer

ChunkingStrategy = Literal["hierarchical_markdown", "fixed_tokens", "whole_note"]
STRATEGIES: tuple[str, ...] = get_args(ChunkingStrategy)


@runtime_checkable
class Chunker(Protocol):
    """What the indexer needs from any strategy."""

    strategy: str

    @property
    def version(self) -> str:
        """The `chunking_version` stored with the note's chunks."""
        ...

    def chunk_note(self, note_content: str, note_title: str) -> list[MarkdownChunk]:
        """The note's chunks in document order (one `outline` chunk for a note with
        no body text; [] when its title is blank too)."""
        ...


class FixedTokenChunker(ChunkerBase):
    """Legacy sliding windows of `max_chunk_tokens` tokens (docs/chunking.md)."""

    strategy = "fixed_tokens"

    def __init__(
        self,
        max_chunk_tokens: int = 512,
        overlap_tokens: int | None = None,
        *,
        tokenizer: Tokenizer | None = None,
        max_input_tokens: int | None = None,
    ) -> None:
        super().__init__(max_chunk_tokens, 0, True, tokenizer, max_input_tokens, 4096)
        default_overlap = min(50, max_chunk_tokens // 5)
        self.overlap_tokens = default_overlap if overlap_tokens is None else overlap_tokens
        if not 0 <= self.overlap_tokens < max_chunk_tokens:
            raise ValueError("overlap_tokens must be in [0, max_chunk_tokens)")

    @property
    def version(self) -> str:
        return f"{super().version}:overlap{self.overlap_tokens}"

    def _chunk(self, note_content: str, note_title: str) -> list[MarkdownChunk]:
        src, doc, index, finisher = self._prepare(note_content)
        title = clean_title(note_title)
        crumb = finisher.crumb([title] if title else [])
        window = self.limits(finisher, crumb).normal
        overlap = min(self.overlap_tokens, window // 2)
        step = max(1, window - overlap)
        lo, hi = src.trim(doc.body_start, len(src))
        pieces: list[Piece] = []
        pos = lo
        while pos < hi:
            first = index.at1(pos)
            end = src.char_boundary(min(index.position(first + window), hi), forward=True)
            if end >= hi or index.estimate(pos, hi) <= window:
                end = hi
            s, e, n = self._fit(index, pos, end, window)
            if s < e and not (pieces and s <= pieces[-1].start):
                pieces.append(Piece(s, e, "fixed", window, n))
            elif s < e:
                pieces[-1] = Piece(s, e, "fixed", window, n)  # same start, reaches further
            if end >= hi and e >= src.trim(pos, hi)[1]:
                break
            nxt = src.char_boundary(index.position(first + step), forward=True)
            # Never leave a gap: the next window starts inside this one.
            pos = (
                nxt
                if pos < nxt <= e
                else max(min(e, nxt), src.char_boundary(pos + 1, forward=True))
            )
        return finisher.chunks([crumb], settle(index, pieces))

    @staticmethod
    def _fit(index: TokenIndex, start: int, end: int, window: int) -> tuple[int, int, int]:
        """Trim [start, end) and shorten it until its exact count fits `window`."""
        src = index.src
        s, e = src.trim(start, end)
        while s < e:
            n = index.exact([(s, e)])[0]
            if n <= window:
                return s, e, n
            cut = index.position(max(index.at1(e) - (n - window) - 1, index.at1(s) + 1))
            cut = src.char_boundary(min(cut, e - 1), forward=False)
            if cut <= s:
                cut = src.char_boundary(s + 1, forward=True)
                return (s, cut, index.exact([(s, cut)])[0]) if cut < e else (s, e, n)
            s, e = src.trim(s, cut)
        return s, e, 0


class WholeNoteChunker(ChunkerBase):
    """The whole note as one chunk unless it exceeds the hard limit (docs/chunking.md)."""

    strategy = "whole_note"

    def __init__(
        self,
        max_chunk_tokens: int = 300,
        min_chunk_tokens: int = 50,
        *,
        tokenizer: Tokenizer | None = None,
        max_input_tokens: int | None = None,
        table_max_tokens: int = 4096,
    ) -> None:
        super().__init__(
            max_chunk_tokens, min_chunk_tokens, True, tokenizer, max_input_tokens, table_max_tokens
        )

    def _chunk(self, note_content: str, note_title: str) -> list[MarkdownChunk]:
        src, doc, index, finisher = self._prepare(note_content)
        title = clean_title(note_title)
        crumb = finisher.crumb([title] if title else [])
        limits = self.limits(finisher, crumb, normal=self.max_input_tokens)
        splitter = Splitter(doc, index, self.min_chunk_tokens)
        pieces = splitter.section(doc.body_start, len(src), doc.top, limits, whole_kind="note")
        return finisher.chunks([crumb], settle(index, pieces))


def get_chunker(
    strategy: ChunkingStrategy,
    *,
    max_chunk_tokens: int = 300,
    min_chunk_tokens: int = 50,
    target_chunk_tokens: int | None = None,
    cohesive_cuts: bool = True,
    tokenizer: Tokenizer | None = None,
    max_input_tokens: int | None = None,
) -> Chunker:
    """The chunker for a `CHUNKING_STRATEGY` name (ValueError for an unknown one).
    `target_chunk_tokens` and `cohesive_cuts` apply to `hierarchical_markdown` only."""
    if strategy == "hierarchical_markdown":
        return MarkdownChunker(
            max_chunk_tokens,
            min_chunk_tokens,
            tokenizer=tokenizer,
            max_input_tokens=max_input_tokens,
            target_chunk_tokens=target_chunk_tokens,
            cohesive_cuts=cohesive_cuts,
        )
    if strategy == "fixed_tokens":
        return FixedTokenChunker(
            max_chunk_tokens, tokenizer=tokenizer, max_input_tokens=max_input_tokens
        )
    if strategy == "whole_note":
        return WholeNoteChunker(
            max_chunk_tokens,
            min_chunk_tokens,
            tokenizer=tokenizer,
            max_input_tokens=max_input_tokens,
        )
    raise ValueError(f"unknown chunking strategy {strategy!r}; expected one of {STRATEGIES}")
