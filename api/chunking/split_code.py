"""The two documented exceptions to "content_md is an exact slice of the note".

A code block over the hard limit is cut between lines, every fragment re-fenced; a table over
its limit is cut between rows, every part after the first repeating the header rows
(docs/chunking.md).
"""

from __future__ import annotations

from bisect import bisect_left

from api.chunking.packing import pack
from api.chunking.parse import Block, code_language
from api.chunking.pieces import Piece
from api.chunking.split_text import CODE_LINES, TextSplitter

_ROW_LEVELS = ("word", "token")


def _fence(src_line: str) -> tuple[str, str]:
    """(prefix, marker) of an opening fence line: container prefix/indent and ``` / ~~~."""
    i = 0
    while i < len(src_line) and src_line[i] not in "`~":
        i += 1
    if i >= len(src_line):
        return "", "```"
    char = src_line[i]
    j = i
    while j < len(src_line) and src_line[j] == char:
        j += 1
    return src_line[:i], src_line[i:j]


def code_fragments(sp: TextSplitter, a: int, b: int, block: Block, limit: int) -> list[Piece]:
    """Re-fenced line fragments of the code block unit [a, b) (docs/chunking.md)."""
    src = sp.src
    language = code_language(block.info)
    if block.info is None:
        return sp.text(a, b, limit, CODE_LINES, "code", {"language": None, "code_block": a})
    a = src.trim(src.line_start(block.start, a), b)[0]  # from the fence line, not blank lines
    open_end = src.line_end(block.start, b)
    # The opening fence line with its own line ending.
    header = src.decode(src.line_start(block.start, a), open_end)
    open_line = header.rstrip("\r\n")
    newline = header[len(open_line) :] or "\n"
    header = open_line + newline
    prefix, marker = _fence(open_line)
    close_start, close_line = _closing_line(sp, block, open_end, marker)
    footer = close_line if close_line is not None else prefix + marker
    overhead = sp.index.tokenizer.count(header + footer) + 1
    budget = limit - overhead
    if budget < 1 or close_start <= open_end:
        # Fences too big to repeat (or no body): plain line slices, not re-fenced.
        return sp.text(a, b, limit, CODE_LINES, "code", {"language": language, "code_block": a})
    meta = {"language": language, "code_block": a, "fence_closed": close_line is not None}

    def fragments(lo: int, hi: int, outer_lo: int, outer_hi: int, budget: int) -> list[Piece]:
        ranges = sp.ranges(lo, hi, max(budget, 1), CODE_LINES)
        out: list[Piece] = []
        last = len(ranges) - 1
        for k, (r0, r1) in enumerate(ranges):
            o0 = outer_lo if k == 0 else r0
            o1 = outer_hi if k == last else r1
            s, e = src.trim(o0, o1)
            if s >= e or (0 < k < last and src.is_blank(r0, r1)):
                continue
            body = src.decode(r0, r1)
            if not body.endswith(("\n", "\r")):
                body += newline
            out.append(
                Piece(
                    s,
                    e,
                    "code",
                    limit,
                    overhead + sp.index.estimate(r0, r1),
                    content=header + body + footer,
                    meta=dict(meta),
                    redo=lambda n, r0=r0, r1=r1, o0=o0, o1=o1: fragments(
                        r0, r1, o0, o1, n - overhead
                    ),
                )
            )
        return out

    return fragments(open_end, close_start, a, b, budget)


def _closing_line(
    sp: TextSplitter, block: Block, open_end: int, marker: str
) -> tuple[int, str | None]:
    """Start and text of the block's closing fence line; (end, None) when unclosed."""
    src, data = sp.src, sp.src.data
    end = min(block.end, len(data))
    while end > open_end and data[end - 1] in b"\r\n":
        end -= 1
    if end <= open_end:
        return block.end, None
    start = src.line_start(end, open_end)
    line = src.decode(start, end)
    core = line.lstrip(" \t>").rstrip(" \t")
    if len(core) >= len(marker) and core == core[0] * len(core) and core[0] == marker[0]:
        return start, line.rstrip("\r")
    return block.end, None


def table_parts(
    sp: TextSplitter, blocks: list[Block], a: int, b: int, block: Block, limit: int
) -> list[Piece]:
    """Row parts of the table unit [a, b) with the header repeated (docs/chunking.md)."""
    src = sp.src
    head = next((blocks[c] for c in block.children if blocks[c].kind == "thead"), None)
    rows = row_starts(sp, blocks, a, block)
    plain_meta = {
        "table_part": 1,
        "table_parts": 1,
        "row_count": len(rows),
        "header_repeated": False,
        "table_block": a,
    }
    if head is None:
        return sp.text(a, b, limit, CODE_LINES, "table", plain_meta)
    rows_lo = src.line_end(src.line_end(head.start, b), b)  # past header and separator lines
    header = src.decode(src.line_start(block.start, a), rows_lo)
    if not header.endswith(("\n", "\r")):
        header += "\n"
    header_tokens = sp.index.tokenizer.count(header)
    budget = limit - header_tokens - 1
    if rows_lo >= b or budget < max(1, limit // 4):
        return sp.text(a, b, limit, CODE_LINES, "table", plain_meta)

    def parts(lo: int, hi: int, first: bool, budget: int) -> list[Piece]:
        budget = max(budget, 1)
        bounds = [lo, *(r for r in rows if lo < r < hi), hi]
        toks: list[int] = sp.index.at(bounds).tolist()
        ranges: list[tuple[int, int]] = []
        for i, j in pack(toks, budget):
            if j == i + 1 and toks[j] - toks[i] > budget:
                ranges.extend(sp.ranges(bounds[i], bounds[j], budget, _ROW_LEVELS))
            else:
                ranges.append((bounds[i], bounds[j]))
        out: list[Piece] = []
        for r0, r1 in ranges:
            s, e = src.trim(r0, r1)
            if s >= e:
                continue
            is_head = first and not out
            meta = {
                "table_part": 0,
                "table_parts": 0,
                "row_count": count_rows(rows, r0, r1),
                "header_repeated": not is_head,
                "table_block": a,
            }
            if is_head:
                s = src.trim(a, r1)[0]
            content = None if is_head else header + src.decode(s, e)
            out.append(
                Piece(
                    s,
                    e,
                    "table",
                    limit,
                    header_tokens + sp.index.estimate(r0, r1),
                    content=content,
                    meta=meta,
                    redo=lambda n, r0=r0, r1=r1, h=is_head: parts(r0, r1, h, n - header_tokens - 1),
                )
            )
        return out

    return parts(rows_lo, b, True, budget)


def row_starts(sp: TextSplitter, blocks: list[Block], a: int, block: Block) -> list[int]:
    """Line starts of a table's body rows."""
    return [
        sp.src.line_start(blocks[c].start, a) for c in block.children if blocks[c].kind == "row"
    ]


def count_rows(starts: list[int], lo: int, hi: int) -> int:
    """How many of the sorted row `starts` lie inside [lo, hi)."""
    return bisect_left(starts, hi) - bisect_left(starts, lo)
