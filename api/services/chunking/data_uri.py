"""Pasted images as `data:` URIs: their base64 payloads are kept in the chunks, not embedded.

A note edited in a browser often carries a pasted screenshot as
`![map](data:image/png;base64,iVBOR…)` or `<img src="data:…">`: a 300 KB image is ~215 000
cl100k tokens of noise that used to become ~720 chunks, every one embedded (billed by
OpenAI, ~50 s of CPU for the local model) and every one a search hit for nothing.

A payload here is a run of 256+ base64 characters (`A-Z a-z 0-9 + / _ -`, then up to two
`=`) right after `;base64,` (any letter case), with `data:` at most 200 characters before
that and no comma, whitespace, `<` or `>` between: a media type and parameters
(`data:image/png;name=shot(1).png;base64,`). Each is replaced, before chunking, by one
character from Unicode plane 15 (private use) that the note does not contain: one per
distinct payload, picked by a hash of the payload. The chunker then sees
`![map](data:image/png;base64,?)`: the image's place and alt text stay in the section they
belong to and are embedded as such, and the payload costs a few tokens. Afterwards every
chunk is mapped back to the note: offsets move past the payloads and `content_md` gets them
back, so `content_md == note_content[start_offset:end_offset]` and lossless coverage hold
as for any note. `embedding_text`, `content_hash` and `token_count` describe what is
embedded: the text with the placeholder. A heading holding a payload reads `…` in
`heading_path`. A block that may be front matter is left as it is (whether it is depends
on its size, which masking would change).

Pure: no I/O. A note without such a payload costs one regex scan (~0.04 ms for 80 KB);
with them, the work per `;base64,` is bounded, so any note stays linear.
"""

from __future__ import annotations

import re
import zlib
from bisect import bisect_left
from dataclasses import dataclass

from api.services.chunking.front_matter import leading_block_end
from api.services.chunking.models import MarkdownChunk

# Shorter payloads (icons, 1x1 pixels) cost little and are left alone.
MIN_PAYLOAD_CHARS = 256
MAX_PREFIX_CHARS = 200  # from `data:` to `;base64,`: media type and parameters
_PLANE_15 = 0xF0000
_PLANE_15_SIZE = 65_521  # a prime (U+F0000..U+FFFF0), so double hashing reaches every slot
_MARK = re.compile(";base64,", re.IGNORECASE)  # a literal: the fast first test
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
        lo = max(0, mark.start() - MAX_PREFIX_CHARS - 5)
        head = text[lo : mark.start()]
        scheme = head.lower().rfind("data:")
        if scheme < 0 or _PREFIX_STOP.search(head, scheme + 5):
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
            if any(ord(c) in shown for c in chunk.section_path):
                chunk.heading_path = [h.translate(shown) for h in chunk.heading_path]
                chunk.section_path = chunk.section_path.translate(shown)
        return chunks


def mask_data_uris(text: str) -> MaskedNote | None:
    """The note with each payload replaced by its own placeholder character, or None when
    it has none (the common case)."""
    if _MARK.search(text) is None:
        return None
    spans = payload_spans(text)
    if spans:
        protected = leading_block_end(text)
        spans = [span for span in spans if span[0] >= protected]
    if not spans:
        return None
    top = _PLANE_15 + _PLANE_15_SIZE
    taken = {ord(c) for c in re.findall(f"[{chr(_PLANE_15)}-{chr(top - 1)}]", text)}
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
    """The payload's character, chosen by a hash of the payload: the same image gets the
    same one wherever it sits, so an edit elsewhere in the note leaves its chunk's
    `content_hash` (and embedding) as it was, unless two payloads' hashes collide (about
    one chance in 65 000 per pair). Double hashing past characters the note uses and
    other payloads' characters; None when none is left."""
    if len(taken) + len(payloads) >= _PLANE_15_SIZE:
        return None
    data = payload.encode("ascii")
    slot = zlib.crc32(data) % _PLANE_15_SIZE
    step = 1 + zlib.adler32(data) % (_PLANE_15_SIZE - 1)
    while (cp := _PLANE_15 + slot) in taken or cp in payloads:
        slot = (slot + step) % _PLANE_15_SIZE
    return cp


def elide_data_uris(text: str, marker: str = _ELLIPSIS) -> str:
    """`text` with each payload replaced by `marker`: the form a person or a chat model
    reads (`![map](data:image/png;base64,…)`); base64 says nothing to either and would eat
    a prompt's budget."""
    return elide_marked(text, marker)[0]


def elide_marked(text: str, marker: str = _ELLIPSIS) -> tuple[str, list[int]]:
    """`elide_data_uris`, and where in its result each inserted marker starts."""
    if _MARK.search(text) is None:
        return text, []
    parts: list[str] = []
    markers: list[int] = []
    last = length = 0
    for start, end in payload_spans(text):
        kept = text[last:start]
        parts += [kept, marker]
        markers.append(length + len(kept))
        length += len(kept) + len(marker)
        last = end
    parts.append(text[last:])
    return "".join(parts), markers
