"""Search with CHUNKING_ENABLED=false (the rollback): whole notes ranked by query-term
frequency, each returned as one whole-note section."""

from __future__ import annotations

import re
from typing import Any

from api.notes.stored import note_content, note_tags, note_title, note_updated_at
from api.notes.versioning import whole_version
from api.retrieval.types import NoteResult, SectionMatch

_WORD = re.compile(r"\w+", re.UNICODE)
NOTE_LEVEL_WARNING = (
    "chunking is disabled (CHUNKING_ENABLED=false): whole notes ranked by word matches only"
)
NOTE_LEVEL_SCAN = 2000  # newest notes scanned by the note-level fallback


def note_level_results(docs: list[dict[str, Any]], query: str, limit: int) -> list[NoteResult]:
    """Rank whole notes by query-term frequency (title words count triple), each returned
    as one whole-note section."""
    terms = {t.lower() for t in _WORD.findall(query) if len(t) > 1}
    scored: list[tuple[float, dict[str, Any]]] = []
    for doc in docs:
        content = note_content(doc)
        words = [w.lower() for w in _WORD.findall(content)]
        title_words = [w.lower() for w in _WORD.findall(note_title(doc))]
        tf = sum(1 for w in words if w in terms) + 3 * sum(1 for w in title_words if w in terms)
        if tf:
            scored.append((tf / (1 + len(words)) ** 0.5, doc))
    scored.sort(key=lambda item: (-item[0], str(item[1]["_id"])))
    return [_whole_note(doc, score) for score, doc in scored[:limit]]


def _whole_note(doc: dict[str, Any], score: float) -> NoteResult:
    content = note_content(doc)
    title = note_title(doc)
    return NoteResult(
        note_id=str(doc["_id"]),
        title=title,
        tags=note_tags(doc),
        updated_at=note_updated_at(doc),
        score=round(score, 6),
        matching_chunks=[
            SectionMatch(
                chunk_ids=[],
                chunk_indexes=[],
                heading_path=[title],
                section_path=title,
                content_md=content,
                start_offset=0,
                end_offset=len(content),
                score=score,
                note_version=whole_version(doc.get("version")),
            )
        ],
    )
