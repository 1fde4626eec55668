"""Pasted images as `data:` URIs: their base64 payloads are kept in the chunks, not embedded.

A note edited in a browser often carries a pasted screenshot as
`![map](data:image/png;base64,iVBOR…)` or `<img src="data:…">`: a 300 KB image is ~215 000
cl100k tokens of noise that used to become ~720 chunks, every one embedded (billed by
OpenAI, ~10 s of CPU for the local model) and every one a search hit for nothing.

Each long base64 payload is replaced, before chunking, by one character from Unicode plane
15 (private use) that the note does not contain: one per distinct payload, picked by a hash
of the payload. The chunker
then sees `![map](data:image/png;base64,?)`: the image's place and alt text stay in the
section they belong to and are embedded as such, and the payload costs a few tokens.
Afterwards every chunk is mapped back to the note: offsets move past the payloads and
`content_md` gets them back, so `content_md == note_content[start_offset:end_offset]`
and lossless coverage hold as for any note. `embedding_text`, `content_hash` and
`token_count` describe what is embedded: the text with the placeholder.

Pure: no I/O. A note without such a payload costs one regex scan (~0.04 ms for 80 KB).
"""

from __future__ import annotations

import re
import zlib
from bisect import bisect_left
from dataclasses import dataclass

from api.services.chunking.models import MarkdownChunk

# Shorter payloads (icons, 1x1 pixels) cost little and are left alone.
MIN_PAYLOAD_CHARS = 256
_PLANE_15 = 0xF0000
_PLANE_15_SIZE = 0xFFFFE - _PLANE_15  # U+FFFFE/U+FFFFF are noncharacters
# `data:[<media type>][;param=value]*;base64,<payload>` (RFC 2397); base64url letters too.
_PAYLOAD = re.compile(
    r"data:(?:[\w.+-]+/[\w.+-]+)?(?:;[\w.+-]+=[^;,\s\"'()<>]*)*;base64,"
    rf"([A-Za-z0-9+/_-]{{{MIN_PAYLOAD_CHARS},}}={{0,2}})",
    re.IGNORECASE,
)
_MARK = re.compile(";base64,", re.IGNORECASE)  # a fast first test: a literal
_PLANE_15_CHARS = re.compile("[\U000f0000-\U000ffffd]")


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
        """Map chunks of `text` back onto the note, in place: offsets and `content_md`."""
        for chunk in chunks:
            chunk.start_offset = self.original_offset(chunk.start_offset)
            chunk.end_offset = self.original_offset(chunk.end_offset)
            chunk.content_md = chunk.content_md.translate(self.payloads)
        return chunks


def mask_data_uris(text: str) -> MaskedNote | None:
    """The note with each base64 payload of at least MIN_PAYLOAD_CHARS replaced by its own
    placeholder character, or None when it has none (the common case)."""
    if _MARK.search(text) is None:
        return None
    spans = [m.span(1) for m in _PAYLOAD.finditer(text)]
    if not spans:
        return None
    taken = {ord(c) for c in _PLANE_15_CHARS.findall(text)}
    parts: list[str] = []
    positions: list[int] = []
    shifts = [0]
    payloads: dict[int, str] = {}
    chosen: dict[str, int] = {}  # payload -> its character (an image pasted twice: one)
    last = length = 0
    for start, end in spans:
        payload = text[start:end]
        cp = chosen.get(payload) or _placeholder(payload, taken, payloads)
        if cp is None:  # plane 15 is full (> 65 000 distinct payloads): left as they are
            break
        chosen[payload] = cp
        payloads[cp] = payload
        parts.append(text[last:start])
        length += start - last
        positions.append(length)
        parts.append(chr(cp))
        length += 1
        shifts.append(shifts[-1] + end - start - 1)
        last = end
    parts.append(text[last:])
    return MaskedNote("".join(parts), positions, shifts, payloads)


def _placeholder(payload: str, taken: set[int], payloads: dict[int, str]) -> int | None:
    """The payload's character: chosen by a hash of the payload, so the same image gets the
    same one wherever it sits and an edit elsewhere in the note leaves its chunk's
    `content_hash` (and embedding) as it was; probing past characters the note uses and
    other payloads' characters. None when none is left."""
    if len(taken) + len(payloads) >= _PLANE_15_SIZE:
        return None
    cp = _PLANE_15 + zlib.crc32(payload.encode("ascii")) % _PLANE_15_SIZE
    while cp in taken or cp in payloads:
        cp = _PLANE_15 + (cp - _PLANE_15 + 1) % _PLANE_15_SIZE
    return cp


def elide_data_uris(text: str, marker: str = "…") -> str:
    """`text` with each payload `mask_data_uris` would mask replaced by `marker`: the form a
    person or a chat model reads (`![map](data:image/png;base64,…)`); base64 says nothing to
    either and would eat a prompt's budget."""
    if _MARK.search(text) is None:
        return text
    return _PAYLOAD.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + marker, text)
