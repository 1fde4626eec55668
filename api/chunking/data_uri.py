"""Pasted images as `data:` URIs: their base64 payloads are kept in the chunks, not embedded.

Each payload (256+ base64 characters after `;base64,`) is replaced before chunking by one
private-use character the note does not contain, and put back after: offsets and
`content_md` stay exact; `embedding_text`, `content_hash` and `token_count` see the
placeholder. Pure, and linear in the note (docs/chunking.md).
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_left
from dataclasses import dataclass
from itertools import accumulate

from api.chunking.front_matter import leading_block_end, read_front_matter
from api.chunking.types import MarkdownChunk

# Shorter payloads (icons, 1x1 pixels) cost little and are left alone.
MIN_PAYLOAD_CHARS = 256
MAX_PREFIX_CHARS = 200  # from `data:` to `;base64,`: media type and parameters
_PLANE_15 = 0xF0000
_PLANE_15_SIZE = 65_521  # a prime (U+F0000..U+FFFF0), so double hashing reaches every slot
_PLANE_15_CHARS = re.compile(f"[{chr(_PLANE_15)}-{chr(_PLANE_15 + _PLANE_15_SIZE - 1)}]")
# A payload's probes before taking the next free character in order: hash collisions
# (crafted, say) cost at most this many probes each.
_MAX_PROBES = 32
# ASCII case folding only: "ſ" (U+017F) must not read as "s", nor "İ" widen a string.
_MARK = re.compile(";base64,", re.IGNORECASE | re.ASCII)  # a literal: the fast first test
_SCHEME = re.compile("data:", re.IGNORECASE | re.ASCII)
_BASE64 = re.compile(rf"[A-Za-z0-9+/_-]{{{MIN_PAYLOAD_CHARS},}}={{0,2}}")
_PREFIX_STOP = re.compile(r"[,\s<>]")
_ELLIPSIS = "…"


def payload_spans(text: str) -> list[tuple[int, int]]:
    """Where `text` holds payloads (see module docstring), in order."""
    spans: list[tuple[int, int]] = []
    for mark in _MARK.finditer(text):
        payload = _BASE64.match(text, mark.end())
        if payload is None:
            continue
        head = text[max(0, mark.start() - MAX_PREFIX_CHARS - 5) : mark.start()]
        schemes = list(_SCHEME.finditer(head))  # the last one counts (a bounded window)
        if not schemes or _PREFIX_STOP.search(head, schemes[-1].end()):
            continue
        spans.append(payload.span())
    return spans


@dataclass(slots=True)
class MaskedNote:
    """A note with its long payloads replaced (see module docstring)."""

    text: str
    positions: list[int]  # each placeholder's offset in `text`, ascending
    shifts: list[int]  # shifts[k]: characters removed before placeholder k (len k + 1)
    payloads: dict[int, str]  # placeholder code point -> the payload it stands for

    def original_offset(self, offset: int) -> int:
        """`offset` in `text` as an offset in the note (a placeholder's start maps to its
        payload's start, its end to the payload's end)."""
        before = bisect_left(self.positions, offset)
        return offset + self.shifts[before]

    def unmask(self, chunks: list[MarkdownChunk]) -> list[MarkdownChunk]:
        """Map chunks of `text` back onto the note, in place: offsets and `content_md`;
        a placeholder in a heading reads "…"."""
        shown = dict.fromkeys(self.payloads, _ELLIPSIS)
        for chunk in chunks:
            chunk.start_offset = self.original_offset(chunk.start_offset)
            chunk.end_offset = self.original_offset(chunk.end_offset)
            chunk.content_md = chunk.content_md.translate(self.payloads)
            if _PLANE_15_CHARS.search(chunk.section_path):
                chunk.heading_path = [h.translate(shown) for h in chunk.heading_path]
                chunk.section_path = chunk.section_path.translate(shown)
        return chunks


def mask_data_uris(text: str, title: str = "") -> MaskedNote | None:
    """The note with each payload replaced by its own placeholder character (one the note
    and its `title` do not use), or None when it has none (the common case)."""
    spans = payload_spans(text)
    if spans:
        spans = _outside_undecided_front_matter(text, spans)
    if not spans:
        return None
    placeholders = _Placeholders(
        {ord(c) for c in _PLANE_15_CHARS.findall(text)}
        | {ord(c) for c in _PLANE_15_CHARS.findall(title)}
    )
    chars: list[str] = []
    chosen: dict[str, int] = {}  # payload -> its character (an image pasted twice: one)
    for start, end in spans:
        payload = text[start:end]
        cp = chosen.get(payload) or placeholders.pick(payload)
        if cp is None:  # plane 15 is full (> 65 000 distinct payloads): the rest stay
            break
        chosen[payload] = cp
        chars.append(chr(cp))
    spans = spans[: len(chars)]
    masked, positions = _substitute(text, spans, chars)
    shifts = list(accumulate((end - start - 1 for start, end in spans), initial=0))
    payloads = {cp: payload for payload, cp in chosen.items()}
    return MaskedNote(masked, positions, shifts, payloads)


def _substitute(
    text: str, spans: list[tuple[int, int]], replacements: list[str]
) -> tuple[str, list[int]]:
    """`text` with each span replaced by its replacement, and where each replacement
    starts in the result."""
    parts: list[str] = []
    starts: list[int] = []
    last = length = 0
    for (start, end), replacement in zip(spans, replacements, strict=True):
        kept = text[last:start]
        parts += [kept, replacement]
        starts.append(length + len(kept))
        length += len(kept) + len(replacement)
        last = end
    parts.append(text[last:])
    return "".join(parts), starts


def _outside_undecided_front_matter(
    text: str, spans: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """`spans` without those in a leading block whose reading as front matter masking
    would change: a block over 64 KB is content, and masking its image would make it
    small enough to be left out of every chunk as metadata. Other blocks (a note that
    opens with a `---` rule, say) are masked like the rest."""
    block = leading_block_end(text)
    if not block or spans[0][0] >= block:
        return spans
    head = text[:block]
    inside = [span for span in spans if span[0] < block]
    masked = _substitute(head, inside, [chr(_PLANE_15)] * len(inside))[0]
    if _is_front_matter(head) == _is_front_matter(masked):
        return spans
    return [span for span in spans if span[0] >= block]


def _is_front_matter(block: str) -> bool:
    data = block.encode("utf-8", "replace")
    return read_front_matter(data).end > (3 if data.startswith(b"\xef\xbb\xbf") else 0)


class _Placeholders:
    """Picks each payload's character by a hash of the payload: the same image gets the
    same one wherever it sits, so an edit elsewhere in the note leaves its chunk's
    `content_hash` (and embedding) as it was, unless two payloads' hashes collide (about
    one chance in 65 000 per pair). Double hashing past characters in use, at most
    `_MAX_PROBES` probes, then the lowest free one."""

    def __init__(self, taken: set[int]) -> None:
        self.used = taken
        self.cursor = _PLANE_15  # every character below it is in use

    def pick(self, payload: str) -> int | None:
        """A free character for `payload` (marked used), or None when none is left."""
        if len(self.used) >= _PLANE_15_SIZE:
            return None
        digest = hashlib.blake2b(payload.encode("ascii"), digest_size=8).digest()
        h = int.from_bytes(digest, "big")
        slot, step = h % _PLANE_15_SIZE, 1 + (h >> 32) % (_PLANE_15_SIZE - 1)
        for _ in range(_MAX_PROBES):
            if _PLANE_15 + slot not in self.used:
                self.used.add(_PLANE_15 + slot)
                return _PLANE_15 + slot
            slot = (slot + step) % _PLANE_15_SIZE
        while self.cursor in self.used:
            self.cursor += 1
        self.used.add(self.cursor)
        return self.cursor


def elide_data_uris(text: str, marker: str = _ELLIPSIS) -> str:
    """`text` with each payload replaced by `marker`: the form a person or a chat model
    reads (`![map](data:image/png;base64,…)`); base64 says nothing to either and would eat
    a prompt's budget."""
    return elide_marked(text, marker)[0]


def elide_marked(text: str, marker: str = _ELLIPSIS) -> tuple[str, list[int]]:
    """`elide_data_uris`, and where in its result each inserted marker starts."""
    spans = payload_spans(text)
    if not spans:
        return text, []
    return _substitute(text, spans, [marker] * len(spans))
