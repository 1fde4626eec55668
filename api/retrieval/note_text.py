"""The parts of a note's text that grouping needs, instead of the whole note.

Merging two hits of one section into one citation cuts `content_md[start:end]` and looks at
the text between them (`grouping._joins`). A merged span never exceeds `max_section_chars`
characters, so those cuts lie within `max_section_chars` of the first hit of the run: search
reads only such windows of a note (`$substrCP`), not a 2 MB note per search. Pure logic.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from api.retrieval.types import ChunkHit

# MongoDB's `$substrCP` walks the string from its start to each window (it counts code
# points), so every window costs up to a pass over the note. Past this many windows per
# note the closest ones are joined, reading a little more text instead.
MAX_WINDOWS = 4
# `$substrCP` takes 32-bit offsets; a larger stored offset (corrupt chunk data) is left to
# the chunks' own text rather than failing the search.
MAX_OFFSET = 2**31 - 1


@dataclass(frozen=True, slots=True)
class TextWindows:
    """Known parts of a note's text: `(start offset, text)` windows; offsets are character
    (code point) offsets into the note's `content_md`."""

    parts: tuple[tuple[int, str], ...]

    @classmethod
    def whole(cls, text: str) -> TextWindows:
        """The whole text as one window."""
        return cls(((0, text),))

    def cut(self, start: int, end: int) -> str | None:
        """`content_md[start:end]` when one window holds all of it, else None (unknown)."""
        if not 0 <= start <= end:
            return None
        for offset, text in self.parts:
            if offset <= start and end <= offset + len(text):
                return text[start - offset : end - offset]
        return None


def section_windows(
    hits: Iterable[ChunkHit], *, max_section_chars: int | None
) -> dict[str, list[tuple[int, int]]]:
    """Per note, the `(start, end)` windows of its text that merging `hits` can cut: for
    every hit that shares its section (heading path) with a later hit, from its start to
    `max_section_chars` further (at most to the section's last hit end), overlaps joined,
    at most `MAX_WINDOWS` per note. Notes with no two hits in one section need no text and
    are left out."""
    sections: dict[tuple[str, tuple[str, ...]], list[ChunkHit]] = {}
    for hit in hits:
        sections.setdefault((hit.note_id, tuple(hit.heading_path)), []).append(hit)
    spans: dict[str, list[tuple[int, int]]] = {}
    for (note_id, _path), group in sections.items():
        if len(group) < 2:
            continue
        group.sort(key=lambda h: (h.start_offset, h.end_offset))
        last_end = max(h.end_offset for h in group)
        for hit in group[:-1]:
            start = max(hit.start_offset, 0)
            if start >= MAX_OFFSET:
                break
            reach = last_end if max_section_chars is None else start + max_section_chars
            end = min(reach, last_end, MAX_OFFSET)
            if start < end:
                spans.setdefault(note_id, []).append((start, end))
    return {note_id: _joined(found) for note_id, found in spans.items()}


def _joined(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping windows joined; then, past `MAX_WINDOWS` of them, the two with the
    smallest gap between them, until `MAX_WINDOWS` remain."""
    joined: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if joined and start <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(joined[-1][1], end))
        else:
            joined.append((start, end))
    while len(joined) > MAX_WINDOWS:
        i = min(range(len(joined) - 1), key=lambda k: joined[k + 1][0] - joined[k][1])
        joined[i : i + 2] = [(joined[i][0], joined[i + 1][1])]
    return joined
