"""The hierarchical markdown chunker (strategy `hierarchical_markdown`, the default).

One parse (pulldown-cmark), one tokenizer pass over the whole note, then pure offset
arithmetic: see docs/chunking.md for the contract and `split`, `split_code`, `finish` for how
each rule is met. Only top-level headings open sections (a heading inside a list item or
block quote is content); heading lines are not part of any chunk, they are the breadcrumb,
except in a note with no body text, whose one `outline` chunk holds them. A section that
fits `max_chunk_tokens` is one chunk, however small: tiny sections are not merged with each
other, since that would give a chunk two breadcrumbs. A longer section's pieces aim at 2/3
of the limit, cut where the text changes topic (`cohesion`).
"""

from __future__ import annotations

import hashlib

import pyromark

from api.chunking.data_uri import mask_data_uris
from api.chunking.finish import Crumb, Finisher, settle
from api.chunking.front_matter import front_matter_end
from api.chunking.obsidian import front_matter_aliases
from api.chunking.packing import DEFAULT_TARGET_SHARE
from api.chunking.parse import Document, heading_text, parse
from api.chunking.pieces import Limits, Piece
from api.chunking.split import Splitter
from api.chunking.text import SourceText, sanitize
from api.chunking.token_index import TokenIndex
from api.chunking.types import MarkdownChunk
from api.tokenizer.encoders import Tokenizer, default_tokenizer

# Bump when the algorithm changes in a way that can change any chunk.
# 4: chunks carry section_index; 5: data: URI payloads not embedded; 6: cuts of a split
# section move to where the text changes topic (`cohesion`); 7: wikilinks embedded as their
# text, front matter aliases beside the title (`obsidian`); 8: a note with no body text
# yields one `outline` chunk (its heading lines, or nothing but its title).
ALGORITHM_REVISION = 8
DEFAULT_MAX_INPUT_TOKENS = 8191  # OpenAI text-embedding-3-*


def clean_title(title: str | None) -> str:
    """The note title as the first breadcrumb element ("" when blank); lone surrogates
    become U+FFFD, as in the content."""
    return " ".join(sanitize(title or "").split())


def heading_path(title: str, stack: list[tuple[int, str]]) -> list[str]:
    """Title + the open headings' texts; a first heading repeating the title is dropped,
    and empty headings (a bare `#`) are skipped."""
    texts = [text for _, text in stack if text]
    # A heading's text is cut at MAX_HEADING_CHARS: compare it with the title cut the same way.
    if title and texts and texts[0].casefold() == heading_text(title).casefold():
        texts = texts[1:]
    return [title, *texts] if title else texts


def heading_bounds(doc: Document) -> list[int]:
    """Byte offsets where each top-level heading starts and ends."""
    blocks = doc.blocks
    return [
        pos
        for bi in doc.top
        if blocks[bi].kind == "heading"
        for pos in (blocks[bi].start, blocks[bi].end)
    ]


class ChunkerBase:
    """Parameters, validation and the `chunking_version` shared by the strategies."""

    strategy = "hierarchical_markdown"

    def __init__(
        self,
        max_chunk_tokens: int,
        min_chunk_tokens: int,
        preserve_code_blocks: bool,
        tokenizer: Tokenizer | None,
        max_input_tokens: int | None,
        table_max_tokens: int,
    ) -> None:
        max_input = DEFAULT_MAX_INPUT_TOKENS if max_input_tokens is None else max_input_tokens
        if max_chunk_tokens < 1:
            raise ValueError("max_chunk_tokens must be at least 1")
        if min_chunk_tokens < 0:
            raise ValueError("min_chunk_tokens must not be negative")
        if max_input < 8:
            raise ValueError("max_input_tokens must be at least 8")
        if table_max_tokens < 1:
            raise ValueError("table_max_tokens must be at least 1")
        self.max_chunk_tokens = max_chunk_tokens
        self.min_chunk_tokens = min_chunk_tokens
        self.preserve_code_blocks = preserve_code_blocks
        self.tokenizer: Tokenizer = tokenizer if tokenizer is not None else default_tokenizer()
        self.max_input_tokens = max_input
        self.table_max_tokens = table_max_tokens
        self._limits_cache: dict[tuple[int, int | None], Limits] = {}

    @property
    def version(self) -> str:
        """The `chunking_version`: changes whenever the output could change."""
        return (
            f"{self.strategy}:r{ALGORITHM_REVISION}:{self.tokenizer.name}"
            f":max{self.max_chunk_tokens}:min{self.min_chunk_tokens}"
            f":in{self.max_input_tokens}:table{self.table_max_tokens}"
            f":code{int(self.preserve_code_blocks)}:pulldown-cmark{pyromark.__version__}"
        )

    def limits(self, finisher: Finisher, crumb: Crumb, *, normal: int | None = None) -> Limits:
        """Token limits for a section with breadcrumb `crumb`: the breadcrumb keeps up to a
        quarter of the model's input (counted by its upper bound, see `Finisher.crumb`);
        content gets the rest (the hard limit)."""
        reserve = 0
        if crumb.embed:
            reserve = min(crumb.bound, self.max_input_tokens // 4) + finisher.sep_tokens
        cached = self._limits_cache.get((reserve, normal))
        if cached is not None:
            return cached
        hard = max(1, self.max_input_tokens - reserve)
        body = min(self.max_chunk_tokens if normal is None else normal, hard)
        limits = Limits(
            normal=body,
            code=hard if self.preserve_code_blocks else body,
            table=min(self.table_max_tokens, hard),
            hard=hard,
        )
        self._limits_cache[(reserve, normal)] = limits
        return limits

    def chunk_note(self, note_content: str, note_title: str) -> list[MarkdownChunk]:
        """The chunks of one note, in document order. A note with no body text (blank, or
        only front matter) is one `outline` chunk with empty content, findable by its
        title; [] when the title is blank too."""
        chunks: list[MarkdownChunk] = []
        if note_content and not note_content.isspace():
            masked = mask_data_uris(note_content, note_title or "")
            if masked is None:
                chunks = self._chunk(note_content, note_title)
            else:
                chunks = masked.unmask(self._chunk(masked.text, note_title))
        return chunks or self._title_only(note_content or "", note_title)

    def _title_only(self, note_content: str, note_title: str) -> list[MarkdownChunk]:
        """The one chunk of a note with no text but its title: empty content at the end of
        the front matter (if any), the title as breadcrumb and as all that is embedded."""
        title = clean_title(note_title)
        if not title:
            return []
        data = sanitize(note_content).encode("utf-8")
        at = len(data[: front_matter_end(data)].decode("utf-8"))
        finisher = Finisher(self.tokenizer, SourceText(""), self.max_input_tokens)
        line = finisher.line_within_input(finisher.crumb([title]))
        digest = hashlib.sha256(line.encode("utf-8")).hexdigest()
        return [MarkdownChunk("", [title], "outline", 0, 0, at, at, title, 1, "only", digest, line)]

    def _chunk(self, note_content: str, note_title: str) -> list[MarkdownChunk]:
        raise NotImplementedError

    def _prepare(self, note_content: str) -> tuple[SourceText, Document, TokenIndex, Finisher]:
        src = SourceText(note_content)
        doc = parse(src)
        index = TokenIndex(self.tokenizer, src)
        aliases = front_matter_aliases(doc.front_matter)
        return src, doc, index, Finisher(self.tokenizer, src, self.max_input_tokens, aliases)


class MarkdownChunker(ChunkerBase):
    """Split markdown notes into heading-aware chunks (see module docstring).

    - `max_chunk_tokens`: a chunk's content is at most this many tokens, except a whole code
      block or table, which may reach the hard limit (the table up to `table_max_tokens`).
    - `min_chunk_tokens`: pieces of a split section smaller than this merge into a
      neighbour when the union still fits (a small section stays one chunk of its own).
    - `preserve_code_blocks`: False lets code blocks be cut at `max_chunk_tokens` too.
    - `tokenizer`: counts tokens exactly; that of the embedding model (cl100k_base default).
    - `max_input_tokens`: the embedding model's input limit (8191 by default); no chunk's
      `embedding_text` exceeds it. The hard limit is this minus the breadcrumb's share.
    - `table_max_tokens`: tables up to this size stay whole; larger ones are cut by rows.
    - `target_chunk_tokens`: when a section must be split, the size its pieces aim at
      (≤ `max_chunk_tokens`, which stays the hard bound: a paragraph up to it is never
      cut). None (default): 2/3 of the limit (`packing.DEFAULT_TARGET_SHARE`), which
      leaves every cut room to move half a piece either way (below) without a piece
      passing the limit. `max_chunk_tokens` itself gives pieces between about half the
      limit and the limit, cut at the boundary nearest the balanced position.
    - `cohesive_cuts`: each cut of a split section goes to the boundary near its balanced
      position where the text on either side shares the fewest informative tokens
      (`cohesion`: a topic shift), instead of the nearest boundary.
    """

    def __init__(
        self,
        max_chunk_tokens: int = 300,
        min_chunk_tokens: int = 50,
        preserve_code_blocks: bool = True,
        *,
        tokenizer: Tokenizer | None = None,
        max_input_tokens: int | None = None,
        table_max_tokens: int = 4096,
        target_chunk_tokens: int | None = None,
        cohesive_cuts: bool = True,
    ) -> None:
        super().__init__(
            max_chunk_tokens,
            min_chunk_tokens,
            preserve_code_blocks,
            tokenizer,
            max_input_tokens,
            table_max_tokens,
        )
        if target_chunk_tokens is not None and not 1 <= target_chunk_tokens <= max_chunk_tokens:
            raise ValueError("target_chunk_tokens must be in [1, max_chunk_tokens]")
        self.target_chunk_tokens = target_chunk_tokens
        self.cohesive_cuts = cohesive_cuts

    @property
    def version(self) -> str:
        """As `ChunkerBase.version`, plus the target when one is set and the cut rule."""
        target = self.target_chunk_tokens
        version = super().version if target is None else f"{super().version}:target{target}"
        return version if self.cohesive_cuts else f"{version}:nearest-cuts"

    def _chunk(self, note_content: str, note_title: str) -> list[MarkdownChunk]:
        src, doc, index, finisher = self._prepare(note_content)
        if self.cohesive_cuts:  # topic windows stop at headings (asked for on first use)
            index.set_barriers(lambda: heading_bounds(doc))
        splitter = Splitter(
            doc,
            index,
            self.min_chunk_tokens,
            self.target_chunk_tokens,
            share=DEFAULT_TARGET_SHARE,
            cohesive=self.cohesive_cuts,
        )
        title = clean_title(note_title)
        crumbs: list[Crumb] = []
        pieces: list[Piece] = []
        stack: list[tuple[int, str]] = []
        # A heading with no body (100 000 of them in a row, say) costs no breadcrumb: the
        # path is built only for a section that has one.
        start = doc.body_start
        members: list[int] = []
        blocks = doc.blocks
        for bi in doc.top:
            block = blocks[bi]
            if block.kind != "heading":
                members.append(bi)
                continue
            end = src.line_start(block.start, start)
            if end > start:
                crumb = finisher.crumb(heading_path(title, stack))
                self._add(
                    pieces,
                    crumbs,
                    crumb,
                    splitter.section(start, end, members, self.limits(finisher, crumb)),
                )
            while stack and stack[-1][0] >= block.level:
                stack.pop()
            stack.append((block.level, block.text))
            start = max(block.end, end)
            members = []
        if start < len(src):
            crumb = finisher.crumb(heading_path(title, stack))
            self._add(
                pieces,
                crumbs,
                crumb,
                splitter.section(start, len(src), members, self.limits(finisher, crumb)),
            )
        if not pieces:
            return self._outline(doc, index, finisher, title)
        return finisher.chunks(crumbs, settle(index, pieces))

    def _outline(
        self, doc: Document, index: TokenIndex, finisher: Finisher, title: str
    ) -> list[MarkdownChunk]:
        """The one chunk of a note whose only text is headings: its heading lines, from
        the first, as many whole ones as fit `max_chunk_tokens` (at least a cut of the
        first), under the title alone, so the note is found by its title and headings.
        [] when it has no heading either."""
        heads = [doc.blocks[bi] for bi in doc.top if doc.blocks[bi].kind == "heading"]
        if not heads:
            return []
        ends = [head.end for head in heads]
        src = doc.src
        start = src.line_start(heads[0].start, doc.body_start)
        crumb = finisher.crumb([title] if title else [])
        limit = self.limits(finisher, crumb).normal
        lo, hi = 0, len(ends) - 1  # the last heading whose end fits the limit (or the first)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if index.estimate(start, ends[mid]) <= limit:
                lo = mid
            else:
                hi = mid - 1
        s, e = src.trim(start, ends[lo])
        settled = settle(index, [Piece(s, e, "outline", limit, index.estimate(s, e))])
        return finisher.chunks([crumb], settled[:1])

    @staticmethod
    def _add(pieces: list[Piece], crumbs: list[Crumb], crumb: Crumb, new: list[Piece]) -> None:
        if new:
            for piece in new:
                piece.group = len(crumbs)
            crumbs.append(crumb)
            pieces.extend(new)
