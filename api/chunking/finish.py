"""From pieces to `MarkdownChunk`s: exact token counts, limits enforced, breadcrumbs.

A piece over its limit by exact count is split again, at last by
`tokenizer.split_at_tokens`; the breadcrumb in `embedding_text` is shortened from the left
so the embedding model never truncates (docs/chunking.md). What is embedded reads as a
reader sees it: the note's aliases beside its title, wikilinks as their text (`obsidian`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from api.chunking.obsidian import readable_links
from api.chunking.pieces import Piece
from api.chunking.text import SourceText
from api.chunking.token_index import TokenIndex
from api.chunking.types import MarkdownChunk
from api.tokenizer.encoders import HuggingFaceTokenizer, TiktokenTokenizer, Tokenizer

_REDO_ROUNDS = 4
_PART_KEYS = (
    ("code_block", "code_part", "code_parts"),
    ("table_block", "table_part", "table_parts"),
)


def exact_counts(index: TokenIndex, pieces: Sequence[Piece]) -> list[int]:
    """Exact token counts of the pieces' contents (slices from the index, others batched)."""
    counts = [0] * len(pieces)
    slices = [(k, p) for k, p in enumerate(pieces) if p.content is None]
    for (k, _), n in zip(slices, index.exact([(p.start, p.end) for _, p in slices]), strict=True):
        counts[k] = n
    built = [(k, p) for k, p in enumerate(pieces) if p.content is not None]
    if built:
        texts = [p.content or "" for _, p in built]
        for (k, _), n in zip(built, index.tokenizer.count_batch(texts), strict=True):
            counts[k] = n
    return counts


def settle(index: TokenIndex, pieces: list[Piece]) -> list[tuple[Piece, int]]:
    """Pieces with exact counts, every one within its limit (docs/chunking.md)."""
    done: list[tuple[Piece, int | None]] = [(p, None) for p in pieces]
    # Rounds 0..R-1 may re-split with `redo`; round R uses split_at_tokens; round R+1 only
    # counts what that produced (over the limit only if one character alone is).
    for round_no in range(_REDO_ROUNDS + 2):
        todo = [p for p, n in done if n is None]
        if not todo:
            break
        fresh = iter(exact_counts(index, todo))
        nxt: list[tuple[Piece, int | None]] = []
        for p, known in done:
            n = next(fresh) if known is None else known
            if n <= p.limit or round_no > _REDO_ROUNDS:
                nxt.append((p, n))
            elif round_no < _REDO_ROUNDS and p.redo is not None:
                tighter = max(1, p.limit - max(n - p.est, n - p.limit) - 1)
                for q in p.redo(tighter):
                    q.limit, q.group = p.limit, p.group
                    nxt.append((q, None))
            else:
                nxt.extend((q, None) for q in _token_split(index, p))
        done = nxt
    return [(p, n) for p, n in done if n is not None]


def _token_split(index: TokenIndex, piece: Piece) -> list[Piece]:
    """Last resort: exact slices from `split_at_tokens` (loses re-fencing/header repeat)."""
    src = index.src
    text = src.decode(piece.start, piece.end)
    out: list[Piece] = []
    pos = piece.start
    for part in index.tokenizer.split_at_tokens(text, piece.limit):
        size = len(part.encode("utf-8"))
        s, e = src.trim(pos, pos + size)
        pos += size
        if s < e:
            meta = dict(piece.meta)
            if "header_repeated" in meta:
                meta["header_repeated"] = False
            out.append(Piece(s, e, piece.kind, piece.limit, 0, meta=meta, group=piece.group))
    return out


@dataclass(slots=True)
class Crumb:
    """A section's breadcrumb: heading path, its line (`section_path`), the line embedded
    (the title with the note's aliases), and that one's token size (bound/exact)."""

    path: list[str]
    line: str
    embed: str
    bound: int  # ≥ the exact token count of `embed`
    tokens: int  # exact count, -1 until needed


class Finisher:
    """Turns settled sections into numbered chunks with breadcrumbs (one note)."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        src: SourceText,
        max_input_tokens: int,
        aliases: Sequence[str] = (),
    ) -> None:
        self.tokenizer = tokenizer
        self.aliases = list(aliases)
        self.src = src
        self.max_input = max_input_tokens
        self.sep_tokens = tokenizer.count("\n\n")
        # For these tokenizers breadcrumb + "\n\n" + content costs the sum of the parts
        # (content starts with a non-blank character); others are always counted directly.
        self.additive = isinstance(tokenizer, TiktokenTokenizer | HuggingFaceTokenizer)
        self.byte_bound = isinstance(tokenizer, TiktokenTokenizer)
        # Shortened breadcrumbs by (path, budget): a section's chunks ask again and again
        # (a long title next to a small model input limit), and re-tokenising the path for
        # every chunk made the cost chunks × breadcrumb length.
        self._shortened: dict[tuple[tuple[str, ...], int], str] = {}

    def crumb(self, path: list[str]) -> Crumb:
        """The breadcrumb of a section; its token size is bounded by its UTF-8 length for
        tiktoken (a byte-level BPE token is at least one byte), so no encode is needed
        unless a chunk comes close to the model's input limit."""
        line = " > ".join(path)
        embed = self._with_aliases(path, line)
        if not embed:
            return Crumb(path, line, embed, 0, 0)
        if self.byte_bound:
            return Crumb(path, line, embed, len(embed.encode("utf-8")), -1)
        n = self.tokenizer.count(embed)
        return Crumb(path, line, embed, n, n)

    def _with_aliases(self, path: list[str], line: str) -> str:
        """The breadcrumb line as embedded: its first element (the title) followed by the
        note's aliases in parentheses."""
        if not self.aliases:
            return line
        names = ", ".join(self.aliases)
        return " > ".join([f"{path[0]} ({names})", *path[1:]]) if path else names

    def crumb_tokens(self, crumb: Crumb) -> int:
        """Exact tokens of the embedded breadcrumb line (counted once, on demand)."""
        if crumb.tokens < 0:
            crumb.tokens = self.tokenizer.count(crumb.embed)
        return crumb.tokens

    def chunks(self, crumbs: list[Crumb], settled: list[tuple[Piece, int]]) -> list[MarkdownChunk]:
        """Numbered chunks for settled pieces in document order; `crumbs[piece.group]` is
        a piece's breadcrumb."""
        if not settled:
            return []
        src = self.src
        starts = src.char_offsets(np.fromiter((p.start for p, _ in settled), dtype=np.int64))
        ends = src.char_offsets(np.fromiter((p.end for p, _ in settled), dtype=np.int64))
        text = src.text
        rows: list[tuple[Crumb, Piece, int, int, int, str]] = []
        for (piece, count), cs, ce in zip(settled, starts.tolist(), ends.tolist(), strict=True):
            content = piece.content
            if content is None:
                content = text[cs:ce]
                if content[0].isspace() or content[-1].isspace():
                    stripped = content.strip()  # Unicode blanks (U+3000, NBSP) at the edges
                    if not stripped:
                        continue
                    cs += len(content) - len(content.lstrip())
                    ce -= len(content) - len(content.rstrip())
                    content = stripped
                    count = self.tokenizer.count(content)
            rows.append((crumbs[piece.group], piece, count, cs, ce, content))
        _number_parts([row[1] for row in rows])
        total = len(rows)
        last = total - 1
        sha256 = hashlib.sha256
        out: list[MarkdownChunk] = []
        sections: dict[int, int] = {}  # piece group -> section number among those kept
        for i, (crumb, piece, count, cs, ce, content) in enumerate(rows):
            embedded, count = self._readable(piece, content, count)
            embedding_text = self.embedding_text(crumb, embedded, count)
            out.append(
                MarkdownChunk(
                    content,
                    list(crumb.path),
                    piece.kind,
                    i,
                    count,
                    cs,
                    ce,
                    crumb.line,
                    total,
                    "only"
                    if total == 1
                    else "first"
                    if i == 0
                    else "last"
                    if i == last
                    else "middle",
                    sha256(embedding_text.encode("utf-8")).hexdigest(),
                    embedding_text,
                    {**piece.meta, "aliases": list(self.aliases)} if self.aliases else piece.meta,
                    sections.setdefault(piece.group, len(sections)),
                )
            )
        return out

    def _readable(self, piece: Piece, content: str, count: int) -> tuple[str, int]:
        """The content as embedded and its token count: wikilinks as their text, unless
        that would cost more tokens than the text as written (the limits count that)."""
        if piece.kind == "code" or "[[" not in content:
            return content, count
        readable = readable_links(content)
        if readable == content:
            return content, count
        n = self.tokenizer.count(readable)
        return (readable, n) if n <= count else (content, count)

    def line_within_input(self, crumb: Crumb) -> str:
        """The breadcrumb line alone, shortened to fit the model's input: what is embedded
        for a chunk with no content."""
        if crumb.bound <= self.max_input or self.crumb_tokens(crumb) <= self.max_input:
            return crumb.line
        return self._shorten(crumb.path, self.max_input)

    def embedding_text(self, crumb: Crumb, content: str, count: int) -> str:
        """Breadcrumb + blank line + content, within `max_input_tokens`."""
        if not crumb.embed:
            return content
        budget = self.max_input - count - self.sep_tokens
        full = crumb.bound
        if full > budget - 2:
            full = self.crumb_tokens(crumb)
        line = crumb.embed if full <= budget else self._shorten(crumb.path, budget)
        if not line:
            return content
        candidate = f"{line}\n\n{content}"
        near = full + self.sep_tokens + count > self.max_input - 2
        if (near or not self.additive) and self.tokenizer.count(candidate) > self.max_input:
            for shrink in range(1, 8):
                line = self._shorten(crumb.path, budget - shrink * 2)
                candidate = f"{line}\n\n{content}" if line else content
                if not line or self.tokenizer.count(candidate) <= self.max_input:
                    return candidate
            return content
        return candidate

    def _shorten(self, path: list[str], budget: int) -> str:
        """The longest "… > tail of the path" breadcrumb that fits `budget` tokens."""
        if budget <= 1:
            return ""
        key = (tuple(path), budget)
        line = self._shortened.get(key)
        if line is None:
            line = self._shortened[key] = self._shorten_uncached(path, budget)
        return line

    def _shorten_uncached(self, path: list[str], budget: int) -> str:
        count = self.tokenizer.count
        for k in range(1, len(path)):
            line = "… > " + " > ".join(path[k:])
            if count(line) <= budget:
                return line
        pieces = self.tokenizer.split_at_tokens(path[-1], max(1, budget - 1))
        line = pieces[0] + "…" if pieces else ""
        return line if line and count(line) <= budget else ""


def _number_parts(pieces: list[Piece]) -> None:
    """Number consecutive code fragments / table parts of one block: part i of n."""
    marked = [
        k
        for k, p in enumerate(pieces)
        if p.meta and ("code_block" in p.meta or "table_block" in p.meta)
    ]
    if not marked:
        return
    for key, part_key, parts_key in _PART_KEYS:
        i = 0
        while i < len(pieces):
            block = pieces[i].meta.get(key)
            if block is None:
                i += 1
                continue
            j = i
            while j < len(pieces) and pieces[j].meta.get(key) == block:
                j += 1
            for n, piece in enumerate(pieces[i:j], start=1):
                meta = piece.meta
                meta.pop(key, None)
                meta[part_key] = n
                meta[parts_key] = j - i
            i = j
