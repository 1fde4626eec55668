"""Structure-quality checks for any chunker's output against its markdown source.

Pure logic, no I/O. The source is parsed once with pyromark (CommonMark + GFM tables + YAML
front matter, byte ranges converted to characters). Chunks are mapped back to the source in a
whitespace-insensitive way: both sides are projected onto their non-whitespace characters,
because peers strip, re-join or re-indent lines. A chunk with trusted offsets (ours) is
mapped by its offsets; a chunk without them is located in order (the whole chunk first, then
line by line for chunks with text the source does not contain, such as an injected title).

Metrics (per document, per chunker):
- split_fences: fenced code blocks whose content lands in more than one chunk;
- split_tables: tables spread over several chunks where a chunk holding rows lacks the header;
- heading_only: chunks whose text is nothing but headings (or nothing at all);
- dropped_chars: non-whitespace source characters outside headings/front matter in no chunk;
- over_limit: chunks whose text costs more than the token limit (caller's counter);
- over_input_limit: chunks whose embedding text exceeds the embedding model's input limit;
- unlocated_chars: chunk characters not found in the source (text the chunker synthesised).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyromark

PARSE_OPTIONS = pyromark.Options.ENABLE_TABLES | pyromark.Options.ENABLE_YAML_STYLE_METADATA_BLOCKS


@dataclass(frozen=True, slots=True)
class ChunkView:
    """What the checks need from one chunk, whatever chunker produced it."""

    text: str
    start: int | None = None  # character offsets into the source, when the chunker has them
    end: int | None = None
    embedding_text: str | None = None  # what would be embedded, when it differs from `text`
    reported_tokens: int | None = None  # the chunk's own token count, when the chunker gives one


@dataclass(frozen=True, slots=True)
class Block:
    """A source block in non-whitespace coordinates: [start, end)."""

    start: int
    end: int
    header: str = ""  # tables: the header row, whitespace removed


@dataclass(frozen=True, slots=True)
class ParsedDoc:
    """A source document parsed once for all chunkers."""

    source: str
    ns: str  # the source without whitespace
    ns_pos: np.ndarray  # source character index of every ns character
    fences: list[Block]
    tables: list[Block]
    heading_mask: np.ndarray  # ns chars inside headings
    excluded_mask: np.ndarray  # ns chars inside headings or front matter


@dataclass(slots=True)
class StructureStats:
    """Counts for one chunker on one document (zero is perfect for every counter)."""

    chunks: int = 0
    split_fences: int = 0
    split_tables: int = 0
    heading_only: int = 0
    dropped_chars: int = 0
    over_limit: int = 0
    over_input_limit: int = 0
    unlocated_chars: int = 0
    max_tokens: int = 0
    # Chunks whose reported token count differs from a recount of their text (None: the
    # chunker reports no counts).
    wrong_counts: int | None = None


def strip_ws(text: str) -> str:
    """`text` without any whitespace (the coordinate system of all comparisons)."""
    return "".join(text.split())


def _byte_to_char(source: str) -> Callable[[int], int]:
    if source.isascii():
        return lambda offset: offset
    raw = np.frombuffer(source.encode("utf-8"), dtype=np.uint8)
    prefix = np.concatenate(([0], np.cumsum((raw & 0xC0) != 0x80)))
    return lambda offset: int(prefix[offset])


def parse_document(source: str) -> ParsedDoc:
    """Parse `source` once: block ranges and masks in non-whitespace coordinates."""
    ns_pos = np.fromiter((i for i, ch in enumerate(source) if not ch.isspace()), dtype=np.int64)
    ns = "".join(source[i] for i in ns_pos.tolist())
    to_char = _byte_to_char(source)

    def ns_range(rng: dict[str, int]) -> tuple[int, int]:
        a, b = to_char(rng["start"]), to_char(rng["end"])
        return int(np.searchsorted(ns_pos, a)), int(np.searchsorted(ns_pos, b))

    fences: list[Block] = []
    tables: list[Block] = []
    heading_mask = np.zeros(len(ns), dtype=bool)
    excluded = np.zeros(len(ns), dtype=bool)
    table_start: tuple[int, int] | None = None
    for event, rng in pyromark.events_with_range(source, options=PARSE_OPTIONS):
        if not isinstance(event, dict) or "Start" not in event:
            continue
        tag = event["Start"]
        kind = tag if isinstance(tag, str) else next(iter(tag))
        if kind == "Heading":
            a, b = ns_range(rng)
            heading_mask[a:b] = True
        elif kind == "MetadataBlock":
            a, b = ns_range(rng)
            excluded[a:b] = True
        elif kind == "CodeBlock" and isinstance(tag, dict) and "Fenced" in tag["CodeBlock"]:
            fences.append(Block(*ns_range(rng)))
        elif kind == "Table":
            table_start = ns_range(rng)
        elif kind == "TableHead" and table_start is not None:
            a, b = ns_range(rng)
            tables.append(Block(table_start[0], table_start[1], ns[a:b]))
            table_start = None
    excluded |= heading_mask
    return ParsedDoc(source, ns, ns_pos, fences, tables, heading_mask, excluded)


def _offset_ranges(doc: ParsedDoc, start: int, end: int) -> list[tuple[int, int]]:
    a = int(np.searchsorted(doc.ns_pos, start))
    b = int(np.searchsorted(doc.ns_pos, end))
    return [(a, b)] if b > a else []


def locate_in_order(
    doc: ParsedDoc, texts: Sequence[str]
) -> tuple[list[list[tuple[int, int]]], int]:
    """Map chunk texts (in output order) to non-whitespace source ranges.

    Returns the ranges per chunk and the number of chunk characters that could not be found
    (text the chunker added). Lines are searched only near the cursor so a short synthetic
    line cannot make the search jump far ahead and lose track.
    """
    cursor = 0
    out: list[list[tuple[int, int]]] = []
    unlocated = 0
    for text in texts:
        target = strip_ws(text)
        if not target:
            out.append([])
            continue
        hit = doc.ns.find(target, cursor)
        if hit >= 0:
            out.append([(hit, hit + len(target))])
            cursor = hit + len(target)
            continue
        ranges: list[tuple[int, int]] = []
        window_end = cursor + len(target) + 1024
        for line in text.splitlines():
            piece = strip_ws(line)
            if not piece:
                continue
            hit = doc.ns.find(piece, cursor, window_end + len(piece))
            if hit < 0:
                unlocated += len(piece)
                continue
            if ranges and ranges[-1][1] == hit:
                ranges[-1] = (ranges[-1][0], hit + len(piece))
            else:
                ranges.append((hit, hit + len(piece)))
            cursor = hit + len(piece)
            window_end = cursor + len(target) + 1024
        out.append(ranges)
    return out, unlocated


def _heading_only_text(text: str) -> bool:
    depth = 0
    for event, _rng in pyromark.events_with_range(text, options=PARSE_OPTIONS):
        if isinstance(event, dict) and "Start" in event:
            tag = event["Start"]
            kind = tag if isinstance(tag, str) else next(iter(tag))
            if depth == 0 and kind != "Heading":
                return False
            depth += 1
        elif isinstance(event, dict) and "End" in event:
            depth -= 1
        elif depth == 0:
            return False  # top-level content outside any block (e.g. a rule)
    return True


def check_structure(
    doc: ParsedDoc,
    chunks: Sequence[ChunkView],
    *,
    limit: int,
    count_tokens: Callable[[str], int],
    input_limit: int | None = None,
    count_input_tokens: Callable[[str], int] | None = None,
) -> StructureStats:
    """Compute every structure metric of `chunks` against the parsed source."""
    stats = StructureStats(chunks=len(chunks))
    if chunks and all(c.start is not None and c.end is not None for c in chunks):
        ranges = [_offset_ranges(doc, c.start or 0, c.end or 0) for c in chunks]
    else:
        ranges, stats.unlocated_chars = locate_in_order(doc, [c.text for c in chunks])

    owner = np.full(len(doc.ns), -1, dtype=np.int64)
    for i, chunk_ranges in enumerate(ranges):
        for a, b in chunk_ranges:
            owner[a:b] = i
    stats.dropped_chars = int(np.count_nonzero((owner < 0) & ~doc.excluded_mask))

    for fence in doc.fences:
        owners = owner[fence.start : fence.end]
        if len(np.unique(owners[owners >= 0])) > 1:
            stats.split_fences += 1
    for table in doc.tables:
        owners = owner[table.start : table.end]
        holders = np.unique(owners[owners >= 0])
        if len(holders) <= 1:
            continue
        header_end = table.start + len(table.header)
        header_holders = set(np.unique(owner[table.start : header_end]).tolist())
        for idx in holders.tolist():
            if idx not in header_holders and table.header not in strip_ws(chunks[idx].text):
                stats.split_tables += 1
                break

    for i, chunk in enumerate(chunks):
        located_content = any(not doc.heading_mask[a:b].all() for a, b in ranges[i])
        if not located_content and _heading_only_text(chunk.text):
            stats.heading_only += 1
        tokens = count_tokens(chunk.text)
        stats.max_tokens = max(stats.max_tokens, tokens)
        if chunk.reported_tokens is not None:
            stats.wrong_counts = (stats.wrong_counts or 0) + (chunk.reported_tokens != tokens)
        if tokens > limit:
            stats.over_limit += 1
        if input_limit is not None and count_input_tokens is not None:
            embed = chunk.embedding_text if chunk.embedding_text is not None else chunk.text
            if count_input_tokens(embed) > input_limit:
                stats.over_input_limit += 1
    return stats
