"""Cutting one section (the content under one heading) into pieces that fit the limits.

Top-level blocks first, then the children of lists and quotes, then text levels
(`split_text`); blocks are packed into balanced groups (`packing.pack`), cuts moved to where
the topic changes (`cohesion`), small pieces merged (docs/chunking.md).
"""

from __future__ import annotations

from api.chunking.packing import pack
from api.chunking.parse import MAX_STRUCTURE_DEPTH, Block, Document, code_language
from api.chunking.pieces import Limits, Piece
from api.chunking.split_code import code_fragments, row_starts, table_parts
from api.chunking.split_text import PROSE, TextSplitter
from api.chunking.token_index import TokenIndex

_CONTAINER_KIND = {"list": "list", "item": "list", "quote": "quote"}
_SINGLE_KIND = {
    "paragraph": "paragraph",
    "list": "list",
    "quote": "quote",
    "html": "html",
    "code": "code",
    "table": "table",
}
_ATOMIC = ("code", "table")


class Splitter(TextSplitter):
    """Splits the sections of one parsed note (see module docstring)."""

    def __init__(
        self,
        doc: Document,
        index: TokenIndex,
        min_tokens: int,
        target: int | None = None,
        *,
        share: float = 1.0,
        cohesive: bool = False,
    ) -> None:
        super().__init__(doc.src, index, target, share=share, cohesive=cohesive)
        self.doc = doc
        self.min_tokens = min_tokens

    def section(
        self, a: int, b: int, block_ids: list[int], limits: Limits, whole_kind: str = "section"
    ) -> list[Piece]:
        """Pieces for the section body [a, b) whose top-level blocks are `block_ids`."""
        s, e = self.src.trim(a, b)
        if s >= e:
            return []
        est = self.index.estimate(s, e)
        if len(block_ids) == 1 and self.doc.blocks[block_ids[0]].kind in _ATOMIC:
            points, owners = self.units(a, b, block_ids)
            if len(owners) == 1 and owners[0] is not None:
                return self.refine(a, b, owners[0], limits, 1, limits.normal)
        if est <= limits.normal:
            # The common case: the whole section is one chunk. Units are only needed again
            # if the exact count disagrees with the estimate (`redo`).
            def redo(n: int) -> list[Piece]:
                points, owners = self.units(a, b, block_ids)
                return self.pack_units(points, owners, b, limits, n, 0, None)

            return [Piece(s, e, whole_kind, limits.normal, est, redo=redo)]
        self.src.focus(a, b)
        points, owners = self.units(a, b, block_ids)
        pieces = self.pack_units(points, owners, b, limits, limits.normal, 0, None)
        return self.merge_small(pieces, limits.normal)

    def units(self, a: int, b: int, block_ids: list[int]) -> tuple[list[int], list[Block | None]]:
        """Unit starts covering [a, b): each block from the start of its first line. Text
        before the first block and non-blank text the parser reports as no block (link
        reference definitions) become units of their own, with block None."""
        src, blocks = self.src, self.doc.blocks
        points: list[int] = []
        owners: list[Block | None] = []
        covered = a  # end of the last block seen
        for bi in block_ids:
            block = blocks[bi]
            start = max(src.line_start(block.start, a), covered)
            if not points:
                if start > a and not src.is_blank(a, start):
                    points.append(a)
                    owners.append(None)
            elif start > covered and not src.is_blank(covered, start):
                self._add_gap(points, owners, covered, start)
            if points and start <= points[-1]:
                if owners[-1] is None:
                    owners[-1] = block  # two blocks open on one line: the unit is shared
            else:
                points.append(start)
                owners.append(block)
            covered = max(covered, min(block.end, b))
        if covered < b and not src.is_blank(covered, b):
            self._add_gap(points, owners, covered, b)
        if not points:
            return [a], [None]
        points[0] = a
        return points, owners

    def _add_gap(self, points: list[int], owners: list[Block | None], lo: int, hi: int) -> None:
        first = lo + (hi - lo) - len(self.src.data[lo:hi].lstrip(b" \t\n\r\x0b\x0c"))
        start = max(self.src.line_start(first, lo), lo)
        if not points or start > points[-1]:
            points.append(start)
            owners.append(None)

    def pack_units(
        self,
        points: list[int],
        owners: list[Block | None],
        b: int,
        limits: Limits,
        limit: int,
        depth: int,
        container: str | None,
    ) -> list[Piece]:
        """Pack units into pieces ≤ `limit`; refine any unit too big on its own."""
        bounds = [*points, b]
        toks: list[int] = self.index.at(bounds).tolist()
        out: list[Piece] = []
        for i, j in pack(toks, limit, self.target_for(limit), self.cohesion):
            lo, hi = bounds[i], bounds[j]
            first = owners[i]
            if j == i + 1 and (
                toks[j] - toks[i] > limit or (first is not None and first.kind in _ATOMIC)
            ):
                out.extend(self.refine(lo, hi, first, limits, depth + 1, limit))
                continue
            s, e = self.src.trim(lo, hi)
            if s >= e:
                continue
            kind = self._kind(owners[i:j], container)
            sub_points, sub_owners = points[i:j], owners[i:j]
            out.append(
                Piece(
                    s,
                    e,
                    kind,
                    limit,
                    toks[j] - toks[i],
                    redo=(
                        lambda n, p=sub_points, o=sub_owners, h=hi: self.pack_units(
                            p, o, h, limits, n, depth, container
                        )
                    ),
                )
            )
        return out

    @staticmethod
    def _kind(group: list[Block | None], container: str | None) -> str:
        if container is not None:
            return _CONTAINER_KIND.get(container, "paragraph")
        if len(group) == 1 and group[0] is not None:
            return _SINGLE_KIND.get(group[0].kind, "paragraph")
        return "paragraph"

    def refine(
        self, a: int, b: int, block: Block | None, limits: Limits, depth: int, limit: int
    ) -> list[Piece]:
        """Pieces for one unit [a, b) (a code block or table, or any unit too big)."""
        if block is None:
            return self.text(a, b, limit, PROSE, "paragraph")
        kind = block.kind
        if kind == "code":
            return self.code(a, b, block, limits, limit)
        if kind == "table":
            return self.table(a, b, block, limits, limit)
        label = _CONTAINER_KIND.get(kind) or _SINGLE_KIND.get(kind, "paragraph")
        if depth > MAX_STRUCTURE_DEPTH:
            return self.text(a, b, limit, None, label)
        if block.children and kind in ("list", "item", "quote", "other"):
            points, owners = self.units(a, b, block.children)
            if len(points) > 1:
                return self.pack_units(points, owners, b, limits, limit, depth, kind)
            if owners[0] is not None:
                return self.refine(a, b, owners[0], limits, depth + 1, limit)
        return self.text(a, b, limit, PROSE if kind == "paragraph" else None, label)

    def merge_small(self, pieces: list[Piece], limit: int) -> list[Piece]:
        """Merge pieces under `min_tokens` into a neighbour when the union fits `limit`.
        Small tails are never dropped; when no neighbour has room they stay alone."""
        if self.min_tokens <= 0 or len(pieces) < 2:
            return pieces
        out: list[Piece] = []
        for piece in pieces:
            out.append(piece)
            while len(out) >= 2:
                x, y = out[-2], out[-1]
                small = x.est < self.min_tokens or y.est < self.min_tokens
                if not small or _part_of_block(x) or _part_of_block(y):
                    break
                est = self.index.estimate(x.start, y.end)
                if est > limit:
                    break
                kind = x.kind if x.kind == y.kind and x.kind in ("list", "quote") else "paragraph"
                out[-2:] = [
                    Piece(x.start, y.end, kind, limit, est, redo=lambda n, x=x, y=y: [x, y])
                ]
        return out

    def code(self, a: int, b: int, block: Block, limits: Limits, limit: int) -> list[Piece]:
        """A code block: whole up to the code limit, else re-fenced line fragments."""
        s, e = self.src.trim(a, b)
        if s >= e:
            return []
        cap = max(limits.code, limit)
        est = self.index.estimate(s, e)
        if est <= cap:
            return [
                Piece(
                    s,
                    e,
                    "code",
                    cap,
                    est,
                    meta={"language": code_language(block.info)},
                    redo=lambda n: code_fragments(self, a, b, block, n),
                )
            ]
        return code_fragments(self, a, b, block, cap)

    def table(self, a: int, b: int, block: Block, limits: Limits, limit: int) -> list[Piece]:
        """A table: whole up to the table limit, else row parts with the header repeated."""
        s, e = self.src.trim(a, b)
        if s >= e:
            return []
        cap = max(limits.table, limit)
        est = self.index.estimate(s, e)
        if est <= cap:
            meta = {
                "table_part": 1,
                "table_parts": 1,
                "row_count": len(row_starts(self, self.doc.blocks, a, block)),
                "header_repeated": False,
            }
            return [
                Piece(
                    s,
                    e,
                    "table",
                    cap,
                    est,
                    meta=meta,
                    redo=lambda n: table_parts(self, self.doc.blocks, a, b, block, n),
                )
            ]
        return table_parts(self, self.doc.blocks, a, b, block, cap)


def _part_of_block(piece: Piece) -> bool:
    """A code fragment or table part: merging it with text would split its block."""
    return piece.content is not None or "code_block" in piece.meta or "table_block" in piece.meta
