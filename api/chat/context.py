"""Building the chat context (pure): numbered sections within a token budget.

Every reference `[n]` is ONE SECTION (note title + heading path + its text), so a citation
points at the exact place in the note, with character offsets. Sections are ordered by
their fused relevance across notes. Note text is wrapped as data (see `prompts`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from api.chat.safety import neutralise
from api.chat.types import Citation
from api.chunking.data_uri import elide_data_uris
from api.retrieval.types import NoteResult

SNIPPET_CHARS = 240
# A section is cut to this many characters per token of the budget BEFORE it is tokenised,
# so a section of megabytes is never counted whole. Prose runs 3-5 characters per cl100k
# token, so the cap bites only on sections that could not fit anyway (or long runs of
# whitespace).
MAX_CHARS_PER_TOKEN = 16


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """The start of `text` on one line, cut at a word boundary."""
    flat = " ".join(text[: limit * 64].split())
    if len(flat) <= limit:
        return flat
    cut = flat.rfind(" ", 0, limit)
    return flat[: cut if cut > limit // 2 else limit] + "…"


_DELIMITER = re.compile(r"<(\s*/?\s*section-data)", re.IGNORECASE)


def _escape(text: str) -> str:
    # The data delimiters must not be forgeable from inside a note, in any letter case or
    # spacing a model might still read as one (`</SECTION-DATA>`, `< /section-data`).
    return _DELIMITER.sub(r"‹\1", text)


def section_block(c: Citation) -> str:
    # The breadcrumb is note text too (a title may hold "</section-data>"): escape it.
    crumb = _escape(" › ".join(c.heading_path) if c.heading_path else c.title)
    return (
        f'[{c.ref}] {crumb}\n<section-data ref="{c.ref}" note_id="{c.note_id}">\n'
        f"{_escape(c.text)}\n</section-data>"
    )


def relevant_or_nothing(results: list[NoteResult], min_relevance: float) -> list[NoteResult]:
    """`results`, or none when their best estimated relevance is below `min_relevance`:
    the notes do not answer, so nothing is cited. Results without an estimate (the
    note-level fallback) are kept."""
    estimates = [s.relevance for n in results for s in n.matching_chunks if s.relevance is not None]
    if estimates and max(estimates) < min_relevance:
        return []
    return results


HEADER = "Most relevant sections of the user's notes (numbered references):"
FOOTER = "When answering, cite these references using [1], [2], etc."


def build_context(
    results: list[NoteResult],
    *,
    budget_tokens: int,
    count_tokens: Callable[[str], int],
    max_sections: int = 8,
) -> tuple[str, list[Citation]]:
    """Number the best sections across `results` and pack them into `budget_tokens`.

    A section that does not fit whole is cut to the remaining budget (if at least a few
    dozen tokens remain); later sections are dropped. Returns the context text and the
    citations in reference order.
    """
    sections = [(s, r) for r in results for s in r.matching_chunks]
    sections.sort(key=lambda pair: -pair[0].score)
    used = count_tokens(HEADER) + count_tokens(FOOTER) + 8
    citations: list[Citation] = []
    blocks: list[str] = []
    seen: set[tuple[str, int, int]] = set()
    for section, note in sections:
        key = (note.note_id, section.start_offset, section.end_offset)
        if key in seen or len(citations) >= max_sections:
            continue
        seen.add(key)
        heading_path = section.heading_path or [note.title]
        # A pasted image's base64 says nothing to the model and would eat the budget.
        text = elide_data_uris(section.content_md)
        if len(text) > budget_tokens * MAX_CHARS_PER_TOKEN:
            text = _at_word(text, budget_tokens * MAX_CHARS_PER_TOKEN)
        citation = Citation(
            ref=len(citations) + 1,
            note_id=note.note_id,
            title=note.title,
            heading_path=list(heading_path),
            start_offset=section.start_offset,
            end_offset=section.end_offset,
            snippet=neutralise(snippet(text)),
            text=text,
            note_version=section.note_version,
            relevance=section.relevance,
        )
        block = section_block(citation)
        cost = count_tokens(block) + 2
        if used + cost > budget_tokens:
            room = (
                budget_tokens - used - count_tokens(section_block(replace(citation, text=""))) - 2
            )
            if room < 40:
                break
            text = _cut_to_tokens(text, room, count_tokens)
            citation = replace(citation, text=text)
            block = section_block(citation)
            cost = count_tokens(block) + 2
        citations.append(citation)
        blocks.append(block)
        used += cost
        if used >= budget_tokens:
            break
    if not citations:
        return "", []
    return "\n\n".join([HEADER, *blocks, FOOTER]), citations


def _cut_to_tokens(text: str, budget: int, count_tokens: Callable[[str], int]) -> str:
    """The longest prefix of `text` (at a word boundary) within `budget` tokens, plus "…"."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) + 1 <= budget:
            lo = mid
        else:
            hi = mid - 1
    return _at_word(text, lo)


def _at_word(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, at a space if one is near, plus " …"."""
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit].rstrip() + " …"
