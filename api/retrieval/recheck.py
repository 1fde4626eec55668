"""Search's check of its candidate notes against `notes`, and the parts of their text that
merged sections are cut from (docs/search.md, steps 4 and 5)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from bson import ObjectId

from api.notes.repository import NotesSearchQueries
from api.notes.versioning import whole_version
from api.retrieval.grouping import DEFAULT_MAX_SECTION_CHARS
from api.retrieval.local.sync import note_meta
from api.retrieval.note_text import TextWindows, section_windows
from api.retrieval.types import ChunkHit, NoteMeta, SearchFilters

RECHECK_SLACK = 4  # a window re-checks limit + max(limit, this) candidate notes


async def current_notes(
    notes: NotesSearchQueries,
    author_id: ObjectId,
    ranked: list[str],
    limit: int,
    filters: SearchFilters,
) -> dict[str, NoteMeta]:
    """Metadata of the candidate notes (`ranked`, best first) that are the author's own,
    active and still pass `filters`, checked a window at a time until `limit` pass: notes
    ranked below those could not be returned anyway."""
    # A note whose `_id` is not an ObjectId cannot be addressed by the API: never returned.
    ranked = [n for n in ranked if ObjectId.is_valid(n)]
    docs: list[dict[str, Any]] = []
    window = limit + max(limit, RECHECK_SLACK)
    for start in range(0, len(ranked), window):
        batch = [ObjectId(n) for n in ranked[start : start + window]]
        found = await notes.active_metas(author_id, batch)
        # The index filtered on each note's metadata as of its last index run: a note
        # edited since must not pass a filter it no longer matches.
        docs += [d for d in found if filters.is_empty or filters.matches(note_meta(d))]
        if len(docs) >= limit:
            break
    # No `indexed_version` check: each backend already returns one whole version per note
    # (the local index swaps atomically; the Atlas pipelines guard with a `$lookup`).
    return {str(d["_id"]): replace(note_meta(d), indexed_version=None) for d in docs}


async def section_texts(
    notes: NotesSearchQueries,
    author_id: ObjectId,
    hits: list[ChunkHit],
    metas: Mapping[str, NoteMeta],
) -> dict[str, TextWindows]:
    """Per note, the windows of its text that merging two hits of one section can cut (not
    whole notes of up to 2 MB). A note whose text changed since its chunks were cut is left
    out: the chunks' offsets index the old text, so its sections are rebuilt from the
    chunks' own text instead."""
    spans = section_windows(
        [h for h in hits if h.note_id in metas], max_section_chars=DEFAULT_MAX_SECTION_CHARS
    )
    if not spans:
        return {}
    found = await notes.text_windows(
        author_id, {ObjectId(n): windows for n, windows in spans.items()}
    )
    versions = {h.note_id: h.note_version for h in hits}
    contents: dict[str, TextWindows] = {}
    for doc in found:
        note_id, texts = str(doc["_id"]), doc.get("windows")
        if isinstance(texts, list) and _chunks_cut_from(doc, versions.get(note_id)):
            starts = [start for start, _end in spans[note_id]]
            contents[note_id] = TextWindows(tuple(zip(starts, texts, strict=True)))
    return contents


def _chunks_cut_from(doc: dict[str, Any], chunk_version: int | None) -> bool:
    """Whether the note's current text is the one chunks of `chunk_version` were cut from:
    it has not changed since. A title or tag edit moves `version` but not
    `content_version` (the version of the last text change); a note from before
    `content_version` counts as changed at its current version."""
    if chunk_version is None:
        return False
    version = whole_version(doc.get("version"))
    changed_at = doc.get("content_version")
    if not isinstance(changed_at, int) or isinstance(changed_at, bool):
        changed_at = version
    if not 1 <= changed_at <= version:
        changed_at = version
    return changed_at <= chunk_version <= version
