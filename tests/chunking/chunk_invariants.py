"""Every invariant of docs/chunking.md, checked on real chunker output.

The structure the checks compare against (top-level headings, fenced code blocks, front
matter) is computed here independently of the chunker's own helpers: headings and fences
from a separate pyromark parse, front matter with a line scan.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import tomllib
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pyromark
import yaml

from api.chunking import MarkdownChunk
from api.chunking.obsidian import readable_links
from api.chunking.parse import MAX_HEADING_CHARS
from api.tokenizer import HuggingFaceTokenizer

_MD = pyromark.Markdown(options=pyromark.Options.ENABLE_TABLES)
_UNICODE_WS = np.array([c for c in range(0x3001) if chr(c).isspace()], dtype=np.uint32)
_LINES = re.compile(r"(?<=\n)")
_BARE_CR = re.compile(r"\r(?!\n)")
# The payload rule of the README, written independently of `data_uri.py`: after each
# `;base64,` (ASCII case-insensitive), 256+ base64 characters and up to two "=", with
# `data:` at most 200 characters before it and no comma, whitespace, "<" or ">" between.
_BASE64_MARK = re.compile(r"(?ia);base64,")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{256,}={0,2}")
_DATA_PREFIX = re.compile(r"(?ia)data:[^,\s<>]{0,200}\Z")
_PRIVATE_CHAR = "[\U000f0000-\U000ffffd]"


@dataclass
class Structure:
    """Where the note's top-level headings and fenced code blocks are (character offsets)."""

    text: str
    body_start: int
    headings: list[tuple[int, int, int, str]]  # (line start, end, level, text)
    fences: list[tuple[int, int, str]]  # (opening line start, block end, opening line)


def front_matter_end(text: str) -> int:
    """Characters taken by a leading BOM and a `---`/`+++` front matter block."""
    return _leading_block(text, load=True)


def _leading_block(text: str, *, load: bool) -> int:
    """The end of a leading BOM and delimited block; with `load`, only of one that loads
    as front matter (else the BOM's)."""
    offset = 1 if text.startswith("\ufeff") else 0
    lines = _LINES.split(_BARE_CR.sub("\n", text[offset:]))  # a bare \r ends a line too
    if not lines:
        return offset
    delim = lines[0].rstrip("\r\n").rstrip(" \t")
    if delim not in ("---", "+++") or not lines[0].endswith("\n"):
        return offset
    if delim == "---" and len(lines) > 1 and not lines[1].strip(" \t\r\n"):
        return offset
    pos = len(lines[0])
    for k, line in enumerate(lines[1:], start=1):
        bare = line.rstrip("\r\n").rstrip(" \t")
        if bare == delim or (delim == "---" and bare == "..."):
            body = "".join(lines[1:k])
            loads = not load or _loads_as_mapping(body, delim)
            return offset + pos + len(line) if loads else offset
        pos += len(line)
    return offset


def _loads_as_mapping(body: str, delim: str) -> bool:
    """Front matter only when empty or a YAML/TOML mapping (small enough to load)."""
    if not body.strip():
        return True
    if len(body.encode("utf-8", "surrogatepass")) > 64 * 1024:
        return False
    try:
        loaded = tomllib.loads(body) if delim == "+++" else yaml.safe_load(body)
    except Exception:  # any load failure means "not metadata"
        return False
    return isinstance(loaded, dict)


def _line_start(text: str, floor: int, pos: int) -> int:
    """Start of the line holding `pos` ("\n", "\r\n" and a bare "\r" end lines). The "\r"
    is looked for after the last "\n" only: searching back to `floor` for a "\r" a note
    without one does not have made the 10 MB test spend 45 s here."""
    after_nl = max(text.rfind("\n", floor, pos) + 1, floor)
    return max(after_nl, text.rfind("\r", after_nl, pos) + 1)


def _line_end(text: str, pos: int) -> int:
    """Index of the first "\n" or "\r" at or after `pos`, or -1 (same bound as above)."""
    nl = text.find("\n", pos)
    cr = text.find("\r", pos, nl if nl >= 0 else len(text))
    return cr if cr >= 0 else nl


def structure(text: str) -> Structure:
    """Top-level headings and fenced code blocks, from an independent parse."""
    start = front_matter_end(text)
    protected = protected_end(text)
    body = text[start:]
    raw = body.encode("utf-8", "surrogatepass")
    # Character index of every byte offset (one pass; the parser reports UTF-8 offsets).
    is_start = (np.frombuffer(raw, dtype=np.uint8) & 0xC0) != 0x80
    char_at = np.concatenate(([0], np.cumsum(is_start)))

    def to_char(byte_pos: int) -> int:
        return start + int(char_at[byte_pos])

    headings: list[tuple[int, int, int, str]] = []
    fences: list[tuple[int, int, str]] = []
    depth = 0
    current: list[str] | None = None
    # A bare "\r" ends a line (CommonMark); pulldown-cmark needs it as "\n" (same length).
    for event, span in _MD.events_with_range(
        _BARE_CR.sub("\n", body.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))
    ):
        if not isinstance(event, dict):
            if current is not None and event in ("SoftBreak", "HardBreak"):
                current.append(" ")
            continue
        if "Start" in event:
            tag = event["Start"]
            if depth == 0 and isinstance(tag, dict) and "Heading" in tag:
                s, e = to_char(span["start"]), to_char(span["end"])
                line_start = _line_start(text, start, s)
                headings.append((max(line_start, start), e, int(tag["Heading"]["level"][1]), ""))
                current = []
            if (
                depth == 0
                and isinstance(tag, dict)
                and "CodeBlock" in tag
                and isinstance(tag["CodeBlock"], dict)
            ):
                s, e = to_char(span["start"]), to_char(span["end"])
                line_start = _line_start(text, start, s)
                nl = _line_end(text, s)
                fences.append((line_start, e, text[line_start : nl if nl >= 0 else e]))
            depth += 1
        elif "End" in event:
            depth -= 1
            if depth == 0 and current is not None:
                s, e, level, _ = headings[-1]
                heading = " ".join("".join(current).split())
                if s >= protected:  # a payload in a protected block stays as written
                    heading = elide_payloads(heading)
                headings[-1] = (s, e, level, heading)
                current = None
        elif current is not None:
            for key in ("Text", "Code"):
                if key in event:
                    current.append(event[key])
    return Structure(text, start, headings, fences)


def non_ws_mask(text: str) -> np.ndarray:
    """True for every character that is not whitespace (str.isspace) and not a BOM."""
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return ~np.isin(codes, _UNICODE_WS) & (codes != 0xFEFF)


def check_chunks(
    chunks: list[MarkdownChunk],
    text: str,
    title: str,
    chunker: object,
    *,
    expect_structure: bool = True,
) -> None:
    """Assert every invariant (see module docstring). `chunker` supplies tokenizer, limits
    and `strategy`; structure checks (headings, fences) apply to hierarchical_markdown."""
    strategy = chunker.strategy  # type: ignore[attr-defined]
    tok = chunker.tokenizer  # type: ignore[attr-defined]
    max_input = chunker.max_input_tokens  # type: ignore[attr-defined]
    max_chunk = chunker.max_chunk_tokens  # type: ignore[attr-defined]
    clean_title = " ".join(title.split())
    if not text.strip():
        assert chunks == [] if not clean_title else [c.chunk_type for c in chunks] == ["outline"]
    if any(c.chunk_type == "outline" for c in chunks):
        _check_outline(chunks, text, clean_title, chunker)
        return
    n = len(chunks)
    mask = non_ws_mask(text)
    info = structure(text)
    note_payloads = payload_spans(text, note=True)
    for i, c in enumerate(chunks):
        assert c.chunk_index == i and c.total_chunks == n
        expected = "only" if n == 1 else "first" if i == 0 else "last" if i == n - 1 else "middle"
        assert c.chunk_position == expected
        assert c.content_md and c.content_md == c.content_md.strip(), repr(c.content_md[:80])
        embedded = embedded_content(c, text, note_payloads)
        assert c.token_count == tok.count(embedded)
        assert 0 <= c.start_offset < c.end_offset <= len(text)
        assert c.section_path == " > ".join(c.heading_path)
        if clean_title:
            assert c.heading_path[0] == clean_title
        assert c.embedding_text == embedded or c.embedding_text.endswith("\n\n" + embedded)
        assert tok.count(c.embedding_text) <= max_input
        assert c.content_hash == hashlib.sha256(c.embedding_text.encode()).hexdigest()
        json.dumps(c.to_dict())
        source = text[c.start_offset : c.end_offset]
        if c.metadata.get("header_repeated"):
            assert c.chunk_type == "table" and c.content_md.endswith(source)
        elif c.chunk_type == "code" and "code_part" in c.metadata and c.content_md != source:
            assert source.strip() in c.content_md  # a re-fenced fragment holds its lines
        else:
            assert c.content_md == source, (c.chunk_type, c.metadata, c.content_md[:60])
        limit = max_input if strategy == "whole_note" else max_chunk
        if c.chunk_type in ("code", "table"):
            limit = max(limit, max_input)
        assert c.token_count <= limit or len(c.content_md) == 1, (c.token_count, limit)
    # Sections are numbered 0, 1, … in note order, with no gaps.
    assert not chunks or chunks[0].section_index == 0
    for a, b in itertools.pairwise(chunks):
        assert b.section_index - a.section_index in (0, 1)
    # Order, no overlap (fixed_tokens windows overlap by design), coverage.
    for a, b in itertools.pairwise(chunks):
        if strategy == "fixed_tokens":
            assert a.start_offset < b.start_offset
        else:
            assert a.end_offset <= b.start_offset
    covered = np.zeros(len(text), dtype=bool)
    for c in chunks:
        covered[c.start_offset : c.end_offset] = True
    if strategy == "hierarchical_markdown":
        headings = np.zeros(len(text), dtype=bool)
        for s, e, _, _ in info.headings:
            headings[s:e] = True
        clash = np.flatnonzero(headings & covered & mask)  # a chunk holding heading text
        assert len(clash) == 0, text[clash[0] :][:40]
        covered |= headings
    covered[: info.body_start] = True
    missing = np.flatnonzero(mask & ~covered)
    assert len(missing) == 0, f"dropped {len(missing)} chars, e.g. {text[missing[0] :][:40]!r}"
    if strategy == "hierarchical_markdown" and expect_structure:
        _check_structure(chunks, info, clean_title, max_input)


def _check_outline(chunks: list[MarkdownChunk], text: str, title: str, chunker: object) -> None:
    """A note with no body text is one `outline` chunk: its heading lines (hierarchical
    chunker only; the others hold them as content), or nothing, under the title alone."""
    strategy = chunker.strategy  # type: ignore[attr-defined]
    tok = chunker.tokenizer  # type: ignore[attr-defined]
    max_input = chunker.max_input_tokens  # type: ignore[attr-defined]
    (c,) = chunks
    assert (c.chunk_index, c.total_chunks, c.chunk_position, c.section_index) == (0, 1, "only", 0)
    assert c.heading_path == ([title] if title else []) and c.section_path == title
    assert c.content_md == text[c.start_offset : c.end_offset] == c.content_md.strip()
    assert c.content_hash == hashlib.sha256(c.embedding_text.encode()).hexdigest()
    assert tok.count(c.embedding_text) <= max_input
    info = structure(text)
    body = non_ws_mask(text)
    body[: info.body_start] = False
    if strategy == "hierarchical_markdown":  # the other strategies hold headings as content
        for s, e, _, _ in info.headings:
            body[s:e] = False
    assert not body.any(), "a note with body text has no outline chunk"
    if not c.content_md:
        assert title and not info.headings
        assert c.start_offset == c.end_offset == info.body_start
        assert c.token_count == 0
        shortened = c.embedding_text.endswith("…") and tok.count(title) > max_input
        assert c.embedding_text == title or shortened
        return
    assert strategy == "hierarchical_markdown" and info.headings
    first = info.headings[0]
    assert first[0] <= c.start_offset and not text[first[0] : c.start_offset].strip()
    inside = [h for h in info.headings if h[0] < c.end_offset]
    assert c.end_offset <= inside[-1][1]
    embedded = embedded_content(c, text, payload_spans(text, note=True))
    assert c.token_count == tok.count(embedded)
    assert c.token_count <= chunker.max_chunk_tokens or len(inside) == 1  # type: ignore[attr-defined]
    assert c.embedding_text == embedded or c.embedding_text.endswith("\n\n" + embedded)


def payload_spans(text: str, *, note: bool = False) -> list[tuple[int, int]]:
    """Where `text` holds base64 payloads of `data:` URIs of 256+ characters; in a whole
    `note`, none inside a leading block that masking would turn into front matter or out
    of it (left as written)."""
    spans = []
    for mark in _BASE64_MARK.finditer(text):
        run = _BASE64_RUN.match(text, mark.end())
        if run and _DATA_PREFIX.search(text, max(0, mark.start() - 205), mark.start()):
            spans.append(run.span())
    if note and spans:
        protected = protected_end(text, spans)
        spans = [(s, e) for s, e in spans if s >= protected]
    return spans


def protected_end(text: str, spans: list[tuple[int, int]] | None = None) -> int:
    """The end of a leading block whose front-matter reading masking its payloads would
    change, else 0."""
    spans = payload_spans(text) if spans is None else spans
    block = _leading_block(text, load=False)
    inside = [(s, e) for s, e in spans if s < block]
    if not inside:
        return 0
    masked = text[:block]
    for s, e in reversed(inside):
        masked = masked[:s] + "\U000f0000" + masked[e:]
    original_fm = _leading_block(text[:block], load=True) > _bom(text)
    masked_fm = _leading_block(masked, load=True) > _bom(text)
    return block if original_fm != masked_fm else 0


def _bom(text: str) -> int:
    return 1 if text.startswith("\ufeff") else 0


def elide_payloads(text: str) -> str:
    """`text` with each payload shown as "…" (as heading paths show them)."""
    for s, e in reversed(payload_spans(text)):
        text = text[:s] + "…" + text[e:]
    return text


def embedded_content(c: MarkdownChunk, text: str, note_payloads: list[tuple[int, int]]) -> str:
    """What of `c.content_md` is embedded: the content itself, except that each base64
    payload of a `data:` URI of 256+ characters (`note_payloads`, in the note) stands as
    one plane-15 private-use character (pasted images are not embedded), and wikilinks
    outside code may read as their text (`readable_links`). Read from `embedding_text`,
    after checking that it is `content_md` with exactly those replacements; a payload is
    never cut by a chunk boundary."""
    lo, hi = c.start_offset, c.end_offset
    assert not [(s, e) for s, e in note_payloads if s < hi and e > lo and not lo <= s < e <= hi]
    source = text[lo:hi]
    # A re-fenced code fragment or a table part holds its source (stripped) after an added
    # fence or header; payloads in a repeated header are found in the text itself.
    core = source.strip()
    shift = c.content_md.rfind(core) - source.find(core) if core else 0
    inside = [(s - lo + shift, e - lo + shift) for s, e in note_payloads if lo <= s and e <= hi]
    if shift > 0:
        inside = payload_spans(c.content_md[:shift]) + inside
    links = "[[" in c.content_md and c.chunk_type != "code"
    for read in (readable_links, str) if links else (str,):
        found = _embedded_as(c, inside, read)
        if found is not None:
            return found
    raise AssertionError(("content_md with its payloads replaced", c.embedding_text[:120]))


def _embedded_as(c: MarkdownChunk, inside: list[tuple[int, int]], read: Any) -> str | None:
    """The content as `embedding_text` holds it, with `read` applied to the text between
    payloads; None when it does not hold it so."""
    if not inside:
        expected = read(c.content_md)
        ok = c.embedding_text == expected or c.embedding_text.endswith("\n\n" + expected)
        return expected if ok else None
    pattern, last = [], 0
    for start, end in inside:
        pattern += [re.escape(read(c.content_md[last:start])), _PRIVATE_CHAR]
        last = end
    pattern.append(re.escape(read(c.content_md[last:])))
    body = re.compile(r"(?:\n\n|^)(" + "".join(pattern) + r")\Z", re.DOTALL)
    found = body.search(c.embedding_text)
    return found.group(1) if found else None


def _cut(heading: str) -> str:
    """A heading as the breadcrumb holds it (DESIGN: at most MAX_HEADING_CHARS, cut at
    the last whole character with "…"). Comparing only the first 255 characters instead
    failed when the cut fell after a space, which the breadcrumb drops."""
    if len(heading) <= MAX_HEADING_CHARS:
        return heading
    return heading[: MAX_HEADING_CHARS - 1].rstrip() + "…"


def _check_structure(
    chunks: list[MarkdownChunk], info: Structure, title: str, max_input: int
) -> None:
    """Heading paths follow the heading tree; fences are whole or re-fenced fragments."""
    starts = [h[0] for h in info.headings]
    # The expected breadcrumb after each heading, built once (stack of open headings).
    expected_after: list[list[str]] = [[title] if title else []]
    stack: list[tuple[int, str]] = []
    for _, _, level, text in info.headings:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, _cut(text)))
        texts = [t for _, t in stack if t]
        if title and texts and texts[0].casefold() == _cut(title).casefold():
            texts = texts[1:]
        expected_after.append([title, *texts] if title else texts)
    # A chunk's section is the number of headings before it; one section, one index.
    section_of = [bisect_right(starts, c.start_offset) for c in chunks]
    for (a, ka), (b, kb) in itertools.pairwise(zip(chunks, section_of, strict=True)):
        assert (a.section_index == b.section_index) == (ka == kb), (ka, kb)
    for c in chunks:
        k = bisect_right(starts, c.start_offset)
        assert c.heading_path == expected_after[k]
        if k < len(info.headings):  # never crosses the next heading
            assert c.end_offset <= info.headings[k][0]
    chunk_starts = [c.start_offset for c in chunks]
    chunk_ends = [c.end_offset for c in chunks]
    for open_start, end, opening in info.fences:
        first = open_start + len(opening) - len(opening.lstrip())
        last = first + len(info_text(info, first, end).rstrip())
        inside = chunks[bisect_right(chunk_ends, open_start) : bisect_left(chunk_starts, end)]
        holder = [c for c in inside if c.start_offset <= first and c.end_offset >= last]
        if holder:
            continue  # the whole block sits in one chunk
        assert inside and all(c.chunk_type == "code" for c in inside), opening
        for c in inside:
            # Re-fenced, unless the model input is too small to repeat the fences at all.
            assert c.content_md.startswith(opening.rstrip("\r")) or (
                max_input < 64 and c.content_md == info.text[c.start_offset : c.end_offset]
            ), (opening, c.content_md[:40])


def info_text(info: Structure, start: int, end: int) -> str:
    """The note's text between two character offsets."""
    return info.text[start:end]


@cache
def minilm_tokenizer() -> HuggingFaceTokenizer:
    """The word-piece tokenizer of all-MiniLM-L6-v2, as the local embedder ships it."""
    import tokenizers

    from connectors.embeddings.local import default_tokenizer_path

    tok = tokenizers.Tokenizer.from_file(str(default_tokenizer_path()))
    return HuggingFaceTokenizer(tok, "all-MiniLM-L6-v2")
