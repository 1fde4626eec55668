"""The note text as the chunker sees it: UTF-8 bytes with cheap byte↔character mapping.

Positions inside the chunker are byte offsets (the parser's and tiktoken's); finished chunks
get character offsets. Also here: the candidate cuts of the text-level fallbacks (lines,
sentences, words), computed with numpy or a C regex scan.
"""

from __future__ import annotations

import re

import numpy as np

# ASCII whitespace as Python's str.isspace sees it (incl. the \x1c-\x1f separators).
# First window of the line searches (bytes); it grows 8-fold until a line break is found.
_LINE_WINDOW = 256
_WS = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"


def _table(members: bytes) -> np.ndarray:
    """A 256-entry lookup table: `table[byte_array]` is a fast vectorised membership test."""
    table = np.zeros(256, dtype=bool)
    table[np.frombuffer(members, dtype=np.uint8)] = True
    return table


def is_ws(arr: np.ndarray) -> np.ndarray:
    """Which bytes of a uint8 array are in `_WS`, by comparisons (" ", 9-13, 28-31; the
    subtractions wrap below 0), not a 256-entry table lookup, whose fancy indexing widens
    every byte to an index first (whole notes are scanned this way)."""
    return (arr == 32) | ((arr - 9) <= 4) | ((arr - 28) <= 3)


# A whole note's cuts are computed this many bytes at a time: the scan's temporaries then
# stay in the CPU cache.
_CUT_BLOCK = 1 << 17

# A sentence ends at terminal punctuation (optionally followed by closing quotes/brackets)
# and whitespace; CJK full-width terminators end a sentence without any whitespace.
_SURROGATE = re.compile("[\ud800-\udfff]")

_IS_TERMINAL = _table(b".!?")
_BR = (b"<br>", b"<br/>", b"</br>")
_IS_CLOSER = _table(b"\"')]*_\x9d\x99")  # incl. the last bytes of ” and ’


def sanitize(text: str) -> str:
    """`text` with lone surrogates (not valid Unicode: they cannot be UTF-8 encoded, stored
    in MongoDB or sent as JSON) replaced by U+FFFD, one character for one, so every
    character offset stays valid. Returns `text` itself when it is already clean."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def _after_break_tags(data: bytes, words: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Move each sentence start past an HTML line break that opens it: "Done! <br> Next"
    starts the next sentence at "Next" ("<br />" is two words)."""
    out = []
    n = len(words)
    for k in ends.tolist():
        at = int(words[k])
        if data.startswith(b"<br />", at):
            k += 2
        elif data.startswith(_BR, at):
            k += 1
        if k < n:
            out.append(k)
    return np.asarray(out, dtype=np.int64)


def _cjk_sentence_ends(seg: np.ndarray) -> np.ndarray:
    """Offsets just past the full-width terminators 。！？ and the ellipsis …, which end a
    sentence without any whitespace after them (CJK text)."""
    lead = np.flatnonzero((seg == 0xE3) | (seg == 0xEF) | (seg == 0xE2))
    lead = lead[lead + 2 < len(seg)]
    b0, b1, b2 = seg[lead], seg[lead + 1], seg[lead + 2]
    hit = (
        ((b0 == 0xE3) & (b1 == 0x80) & (b2 == 0x82))  # 。
        | ((b0 == 0xEF) & (b1 == 0xBC) & ((b2 == 0x81) | (b2 == 0x9F)))  # ！ ？
        | ((b0 == 0xE2) & (b1 == 0x80) & (b2 == 0xA6))  # …
    )
    return lead[hit] + 3


def _utf8_size(lead: int) -> int:
    return 4 if lead >= 0xF0 else 3 if lead >= 0xE0 else 2


class SourceText:
    """A note's text, its UTF-8 bytes and the map between byte and character offsets."""

    __slots__ = (
        "_cum_extra", "_lead_bytes", "_lead_chars", "_region", "_scanned", "_window", "arr",
        "data", "has_cr", "is_ascii", "text",
    )  # fmt: skip

    def __init__(self, text: str) -> None:
        self.text = sanitize(text)
        self.data = self.text.encode("utf-8")
        self.arr = np.frombuffer(self.data, dtype=np.uint8)
        self.is_ascii = len(self.data) == len(self.text)
        # CommonMark ends lines at "\n", "\r\n" or a bare "\r" (old Mac exports, some
        # editors); only when a "\r" is present do line searches need to look for it.
        self.has_cr = b"\r" in self.data
        # The last scanned region and its cuts (the whole note once that was scanned).
        self._window: tuple[int, int, dict[str, np.ndarray]] | None = None
        self._scanned = 0  # bytes scanned span by span so far
        self._region = (0, 0)
        if self.is_ascii:
            empty = np.zeros(0, dtype=np.int64)
            self._lead_bytes, self._lead_chars = empty, empty
            self._cum_extra = np.zeros(1, dtype=np.int64)
            return
        # Lead bytes of multi-byte characters and how many continuation bytes each carries.
        lead = np.flatnonzero(self.arr >= 0xC0)
        codes = self.arr[lead]
        extra = np.where(codes >= 0xF0, 3, np.where(codes >= 0xE0, 2, 1)).astype(np.int64)
        cum = np.zeros(len(lead) + 1, dtype=np.int64)
        np.cumsum(extra, out=cum[1:])
        self._lead_bytes = lead.astype(np.int64)
        self._lead_chars = self._lead_bytes - cum[:-1]
        self._cum_extra = cum

    def __len__(self) -> int:
        return len(self.data)

    def char_offsets(self, byte_positions: np.ndarray) -> np.ndarray:
        """Character offsets of byte offsets that sit on character boundaries."""
        positions = np.asarray(byte_positions, dtype=np.int64)
        if self.is_ascii:
            return positions
        before = np.searchsorted(self._lead_bytes, positions, side="left")
        return positions - self._cum_extra[before]

    def char_offset(self, byte_pos: int) -> int:
        """Character offset of one byte offset (on a character boundary)."""
        if self.is_ascii:
            return byte_pos
        before = int(np.searchsorted(self._lead_bytes, byte_pos, side="left"))
        return byte_pos - int(self._cum_extra[before])

    def byte_offsets(self, char_positions: np.ndarray) -> np.ndarray:
        """Byte offsets of character offsets."""
        positions = np.asarray(char_positions, dtype=np.int64)
        if self.is_ascii:
            return positions
        before = np.searchsorted(self._lead_chars, positions, side="left")
        return positions + self._cum_extra[before]

    def decode(self, start: int, end: int) -> str:
        """The text between two byte offsets on character boundaries."""
        return self.data[start:end].decode("utf-8")

    def trim(self, start: int, end: int) -> tuple[int, int]:
        """Shrink a byte span past whitespace (str.isspace) at both ends; (x, x) if blank."""
        data = self.data
        while True:
            while start < end and data[start] in _WS:
                start += 1
            if start < end and data[start] >= 0x80:
                size = _utf8_size(data[start])
                if data[start : start + size].decode("utf-8", "replace").isspace():
                    start += size
                    continue
            break
        while True:
            while end > start and data[end - 1] in _WS:
                end -= 1
            if end > start and data[end - 1] >= 0x80:
                lead = end - 1
                while lead > start and (data[lead] & 0xC0) == 0x80:
                    lead -= 1
                if data[lead:end].decode("utf-8", "replace").isspace():
                    end = lead
                    continue
            break
        return start, end

    def is_blank(self, start: int, end: int) -> bool:
        """True when the span holds only whitespace."""
        rest = self.data[start:end].strip(_WS)
        return not rest or (rest[0] >= 0x80 and rest.decode("utf-8", "replace").isspace())

    def line_start(self, pos: int, floor: int = 0) -> int:
        """Start of the line holding byte `pos`, never before `floor`.

        With "\r" in the note, searched in widening windows: a search for one kind of line
        break goes straight back to `floor` when the note has none of that kind, and with
        bare "\r" endings that made chunking quadratic (10.9 s for a 2 MB note of one-line
        paragraphs). Without "\r", one backward search stops at the line's start."""
        data = self.data
        if not self.has_cr:
            return max(data.rfind(b"\n", floor, pos) + 1, floor)
        width = _LINE_WINDOW
        while True:
            lo = max(floor, pos - width)
            hit = max(data.rfind(b"\n", lo, pos), data.rfind(b"\r", lo, pos))
            if hit >= 0 or lo == floor:
                return max(hit + 1, floor)
            width *= 8

    def line_end(self, pos: int, ceiling: int) -> int:
        """Offset just past the line ending ("\n", "\r\n" or "\r") of the line that holds
        `pos` (or `ceiling`); with "\r" in the note, searched as `line_start`."""
        data = self.data
        if not self.has_cr:
            nl = data.find(b"\n", pos, ceiling)
            return ceiling if nl < 0 else nl + 1
        width = _LINE_WINDOW
        while True:
            hi = min(ceiling, pos + width)
            nl = data.find(b"\n", pos, hi)
            cr = data.find(b"\r", pos, hi if nl < 0 else nl)
            if cr >= 0:
                return cr + 2 if cr + 1 < ceiling and data[cr + 1] == 0x0A else cr + 1
            if nl >= 0:
                return nl + 1
            if hi == ceiling:
                return ceiling
            width *= 8

    def char_boundary(self, pos: int, *, forward: bool) -> int:
        """Move `pos` off UTF-8 continuation bytes (to the next or previous character)."""
        data, n = self.data, len(self.data)
        if forward:
            while pos < n and (data[pos] & 0xC0) == 0x80:
                pos += 1
        else:
            while pos > 0 and pos < n and (data[pos] & 0xC0) == 0x80:
                pos -= 1
        return pos

    # Candidate cuts: byte offsets strictly inside (start, end) where a piece may begin.
    # Computed lazily and vectorised: region by region (see `focus`) while the regions
    # scanned stay under a quarter of the note, so a structured note with three oversized
    # paragraphs does not scan all its text; otherwise once for the whole note.

    def focus(self, start: int, end: int) -> None:
        """Announce that cuts will be asked for inside [start, end) (a section being split):
        a later request inside it scans the whole region once, not each span on its own."""
        self._region = (start, end)

    def line_cuts(self, start: int, end: int) -> np.ndarray:
        """Starts of lines."""
        return self._slice("line", start, end)

    def word_cuts(self, start: int, end: int) -> np.ndarray:
        """Starts of words (a non-whitespace byte after whitespace)."""
        return self._slice("word", start, end)

    def sentence_cuts(self, start: int, end: int, *, at_line_start: bool = False) -> np.ndarray:
        """Starts of sentences: a word whose preceding word ends with . ! or ? (optionally
        followed by closing quotes/brackets), or text after a CJK full stop. With
        `at_line_start`, only sentences that also start a line: in text whose paragraphs are
        single lines without blank lines between them (plain-text exports), these are the
        paragraph starts, better cuts than sentences in the middle of a paragraph."""
        return self._slice("sentence_line" if at_line_start else "sentence", start, end)

    def _slice(self, kind: str, start: int, end: int) -> np.ndarray:
        cuts = self._table(start, end)[kind]
        # The array method skips np.searchsorted's dispatch wrapper (called per span).
        lo = int(cuts.searchsorted(start, side="right"))
        hi = int(cuts.searchsorted(end, side="left"))
        return cuts[lo:hi]

    def _table(self, start: int, end: int) -> dict[str, np.ndarray]:
        """Cuts valid inside [start, end): the cached window's, or a new region's, or the
        whole note's."""
        win = self._window
        if win is not None and win[0] <= start and end <= win[1]:
            return win[2]
        lo, hi = self._region
        if not lo <= start <= end <= hi:
            lo, hi = start, end
        if 4 * (self._scanned + hi - lo) >= len(self.data):
            lo, hi = 0, len(self.data)
        self._scanned += hi - lo
        whole = lo == 0 and hi == len(self.data)
        table = self._whole_note_cuts() if whole else self.compute_cuts(lo, hi)
        self._window = (lo, hi, table)
        return table

    def compute_cuts(self, start: int, end: int) -> dict[str, np.ndarray]:
        """Every kind of cut, correct for any position strictly inside (start, end).

        A sentence start depends on the last bytes of the word before it, or of the word
        before a line-break tag that opens it ("One. <br /> Two"), so the scan begins a few
        bytes before the end of the third word preceding `start`; the tag may also begin
        just before `end`, so the scan ends a few bytes after it. Every other kind depends
        only on the byte before the cut."""
        w0 = self._scan_start(start)
        cuts = self._cuts_of(w0, min(end + 8, len(self.data)))
        if w0:
            for key in cuts:
                cuts[key] += w0
        return cuts

    def _whole_note_cuts(self, block: int = _CUT_BLOCK) -> dict[str, np.ndarray]:
        """`compute_cuts` of the whole note, `block` bytes at a time: each block's scan
        starts one byte early, so its cuts are right from the block's first byte on."""
        n = len(self.data)
        if n <= block:
            return self.compute_cuts(0, n)
        parts: list[dict[str, np.ndarray]] = []
        for a in range(0, n, block):
            b = min(n, a + block)
            cuts = self.compute_cuts(max(a - 1, 0), b)
            parts.append({kind: c[(c >= a) & (c < b)] for kind, c in cuts.items()})
        return {kind: np.concatenate([p[kind] for p in parts]) for kind in parts[0]}

    def _scan_start(self, start: int) -> int:
        back = 256
        while start > 0:
            lo = max(0, start - back)
            ws = is_ws(self.arr[lo:start])
            ends = np.flatnonzero(~ws[:-1] & ws[1:])  # last bytes of words
            if len(ws) and not ws[-1]:
                ends = np.append(ends, len(ws) - 1)  # a word running into `start`
            if len(ends) >= 3:
                return max(0, lo + int(ends[-3]) - 3)
            if lo == 0:
                return 0
            back *= 4
        return 0

    def _cuts_of(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """Cuts of the bytes [lo, hi), as offsets relative to `lo`."""
        arr = self.arr[lo:hi]
        data = self.data if lo == 0 and hi == len(self.data) else self.data[lo:hi]
        empty = np.zeros(0, dtype=np.int64)
        line_ends = arr == 10
        if self.has_cr:
            # A bare "\r" ends a line too; in "\r\n" only the "\n" does.
            last_bare = hi >= len(self.data) or self.data[hi] != 10
            line_ends |= (arr == 13) & np.append(arr[1:] != 10, last_bare)
        out = {"line": np.flatnonzero(line_ends).astype(np.int64) + 1}
        if len(arr) < 2:
            out.update(word=empty, sentence=empty, sentence_line=empty)
            return out
        ws = is_ws(arr)
        # Offsets where whitespace starts or ends. A word start's previous flip is the start
        # of the blank run before it, so the byte before that flip ends the previous word.
        flips = np.flatnonzero(ws[1:] != ws[:-1]) + 1
        word_flip = np.flatnonzero(~ws[flips])  # indexes (into flips) of word starts
        words = flips[word_flip]
        out["word"] = words
        word_flip = word_flip[word_flip > 0]
        starts = before = empty
        if len(word_flip):
            followers = flips[word_flip]
            last = flips[word_flip - 1] - 1
            c1 = arr[last]
            c0 = arr[np.maximum(last - 1, 0)]
            c00 = arr[np.maximum(last - 3, 0)]
            closed = _IS_CLOSER[c1] & (_IS_TERMINAL[c0] | _IS_TERMINAL[c00])
            ends = np.flatnonzero(_IS_TERMINAL[c1] | closed)
            if b"<br" in data or b"</br" in data:
                ends = _after_break_tags(data, followers, ends)
            starts, before = followers[ends], last[ends]
        newlines = out["line"] - 1
        crossed = np.searchsorted(newlines, starts) - np.searchsorted(newlines, before, "right")
        out["sentence_line"] = np.unique(starts[crossed > 0])
        sentence = np.unique(starts)
        if not self.is_ascii:
            sentence = np.union1d(sentence, _cjk_sentence_ends(arr))
        out["sentence"] = sentence
        return out
