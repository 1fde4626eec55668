"""Fold ranked chunk hits into ranked notes with merged, section-level matches.

A note's score comes from all its hits' scores by a named `NoteScorer` (`NOTE_SCORERS`).
Hits of one note in one section (same `section_index`; same heading path for chunks
indexed before they carried it) merge into one `SectionMatch` while the span stays within
`max_section_chars`; its text is cut from the note's text when known, else joined from the
chunks. See docs/search.md (step 4).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from itertools import pairwise
from typing import Any

from api.retrieval.local.fulltext import CJK_CHAR
from api.retrieval.note_text import TextWindows
from api.retrieval.types import ChunkHit, NoteMeta, NoteResult, SectionMatch, as_utc

NoteScorer = Callable[[Sequence[float]], float]

DEFAULT_NOTE_SCORER = "weighted_max_sum"
DEFAULT_MAX_SECTION_CHARS = 6000
# A span's size against max_section_chars: its characters, each CJK one counted this many
# times (about a token each, where English averages four characters a token), so a long
# Japanese section is cut into spans that fit chat's context too.
CJK_CHAR_WEIGHT = 4
GAP_MARKER = "…"

# An ATX heading line between two chunks that are not adjacent (CommonMark allows up to
# three spaces of indentation; lines end at \n, \r\n or a bare \r). Setext underlines are
# not sought there: a `---` in code between them would look like one. (Between adjacent
# chunks any visible text is a heading, see `_joins`.)
_HEADING_LINE = re.compile(r"(?:(?<=[\r\n])|\A) {0,3}#{1,6}(?=[ \t\r\n]|\Z)")


def weighted_max_sum(
    scores: Sequence[float], *, max_weight: float = 0.7, sum_weight: float = 0.3
) -> float:
    """`max_weight × max + sum_weight × sum` (0.7 and 0.3 by default); 0 for no scores."""
    if not scores:
        return 0.0
    return max_weight * max(scores) + sum_weight * sum(scores)


def max_score(scores: Sequence[float]) -> float:
    """The best score only; 0 for no scores."""
    return max(scores, default=0.0)


def max_decayed_sum(scores: Sequence[float], *, decay: float = 0.5) -> float:
    """`s1 + decay·s2 + decay²·s3 + …` over scores sorted best first; 0 for no scores."""
    total = 0.0
    factor = 1.0
    for s in sorted(scores, reverse=True):
        total += factor * s
        factor *= decay
    return total


def sum_scores(scores: Sequence[float]) -> float:
    """Plain sum of scores."""
    return float(sum(scores))


NOTE_SCORERS: dict[str, NoteScorer] = {
    "weighted_max_sum": weighted_max_sum,
    "max": max_score,
    "max_decayed_sum": max_decayed_sum,
    "sum": sum_scores,
}


def resolve_note_scorer(score: str | NoteScorer, **params: float) -> NoteScorer:
    """A scorer by name (see `NOTE_SCORERS`) or as given; `params` are bound as keyword
    arguments (e.g. `resolve_note_scorer("max_decayed_sum", decay=0.3)`)."""
    if callable(score):
        return partial(score, **params) if params else score
    try:
        scorer = NOTE_SCORERS[score]
    except KeyError:
        raise ValueError(f"unknown note scorer {score!r}; known: {sorted(NOTE_SCORERS)}") from None
    return partial(scorer, **params) if params else scorer


def rank_note_ids(
    hits: Iterable[ChunkHit], *, author_id: str, score: str | NoteScorer = DEFAULT_NOTE_SCORER
) -> list[str]:
    """The notes of `author_id`'s hits, best first, in the order `group_by_note` ranks
    them (same note score, same ties) — before their metadata is known, so the caller can
    look up only as many notes as it will return."""
    scorer = resolve_note_scorer(score)
    by_note = _best_hits_by_note(h for h in hits if h.author_id == author_id)
    return sorted(by_note, key=lambda n: -scorer([h.score for h in by_note[n]]))


def newest_version_per_note(hits: Sequence[ChunkHit]) -> list[ChunkHit]:
    """`hits` without those of a note version older than another hit's of the same note.
    Each retriever reads one version per note, but Atlas runs the vector and keyword
    queries side by side, so a re-index committing between them could otherwise fuse two
    versions of a note into one result, whose offsets index different texts."""
    newest: dict[str, int] = {}
    for hit in hits:
        newest[hit.note_id] = max(newest.get(hit.note_id, hit.note_version), hit.note_version)
    return [h for h in hits if h.note_version == newest[h.note_id]]


def _best_hits_by_note(hits: Iterable[ChunkHit]) -> dict[str, list[ChunkHit]]:
    """`hits` grouped by note, a chunk id seen twice kept once (its best score); notes in
    the order of their first hit (the tie-break of `group_by_note` and `rank_note_ids`)."""
    best: dict[str, ChunkHit] = {}
    for hit in hits:
        seen = best.get(hit.chunk_id)
        if seen is None or hit.score > seen.score:
            best[hit.chunk_id] = hit
    by_note: dict[str, list[ChunkHit]] = {}
    for hit in best.values():
        by_note.setdefault(hit.note_id, []).append(hit)
    return by_note


def group_by_note(
    hits: Iterable[ChunkHit],
    notes: Mapping[str, NoteMeta],
    *,
    limit: int,
    chunks_per_note: int,
    score: str | NoteScorer = DEFAULT_NOTE_SCORER,
    note_contents: Mapping[str, str | TextWindows] | None = None,
    max_section_chars: int | None = DEFAULT_MAX_SECTION_CHARS,
    section_score: str | NoteScorer | None = None,
) -> list[NoteResult]:
    """Group `hits` by parent note and rank the notes; see the module docstring.

    `notes` holds the metadata of the notes the caller is allowed to return (the user's):
    hits of notes missing from it, of another author, or of a version other than a known
    `NoteMeta.indexed_version` are dropped. A chunk id seen twice counts once (best score).
    Returns at most `limit` notes (best first; of two with one score, the one whose first
    hit comes first in `hits`, i.e. in fusion's order, so ties rank alike in every
    database), each with at most `chunks_per_note` sections (best first; ties by position
    in the note).
    """
    if limit < 0:
        raise ValueError("limit must be >= 0")
    if chunks_per_note < 1:
        raise ValueError("chunks_per_note must be >= 1")
    scorer = resolve_note_scorer(score)
    section_scorer = scorer if section_score is None else resolve_note_scorer(section_score)

    def allowed(hit: ChunkHit) -> bool:
        meta = notes.get(hit.note_id)
        if meta is None or meta.author_id != hit.author_id:
            return False
        return meta.indexed_version is None or hit.note_version == meta.indexed_version

    by_note = _best_hits_by_note(filter(allowed, hits))

    results: list[NoteResult] = []
    for note_id, note_hits in by_note.items():
        meta = notes[note_id]
        content = note_contents.get(note_id) if note_contents is not None else None
        sections = merge_sections(
            note_hits,
            scorer=section_scorer,
            note_content=content,
            max_section_chars=max_section_chars,
        )
        sections.sort(key=lambda s: (-s.score, s.start_offset, s.chunk_indexes[0]))
        results.append(
            NoteResult(
                note_id=note_id,
                title=meta.title,
                tags=list(meta.tags),
                updated_at=as_utc(meta.updated_at),
                score=scorer([h.score for h in note_hits]),
                matching_chunks=sections[:chunks_per_note],
            )
        )
    results.sort(key=lambda r: -r.score)  # stable: ties keep their first hits' order
    return results[:limit]


def merge_sections(
    hits: Sequence[ChunkHit],
    *,
    scorer: NoteScorer,
    note_content: str | TextWindows | None = None,
    max_section_chars: int | None = DEFAULT_MAX_SECTION_CHARS,
) -> list[SectionMatch]:
    """Merge one note's hits into sections (in note order). A section of one chunk is that
    chunk's `content_md`; of several, `content_md[start:end]` when `note_content` holds it
    (unmatched text between the chunks included), else the chunks' texts joined by blank
    lines with a `…` line where chunks were not matched."""
    if isinstance(note_content, str):
        note_content = TextWindows.whole(note_content)
    ordered = sorted(hits, key=lambda h: (h.chunk_index, h.start_offset))
    runs: list[list[ChunkHit]] = []
    for hit in ordered:
        if runs and _joins(runs[-1], hit, note_content, max_section_chars):
            runs[-1].append(hit)
        else:
            runs.append([hit])
    return [_section(run, scorer, note_content) for run in runs]


def _joins(
    run: list[ChunkHit], hit: ChunkHit, content: TextWindows | None, max_chars: int | None
) -> bool:
    last = run[-1]
    if hit.heading_path != last.heading_path:
        return False
    if max_chars is not None and _span_size([*run, hit]) > max_chars:
        return False
    if hit.section_index is not None and last.section_index is not None:
        return hit.section_index == last.section_index
    adjacent = hit.chunk_index == last.chunk_index + 1
    gap = content.cut(last.end_offset, hit.start_offset) if content is not None else None
    if gap is not None:
        # Chunks cover every character but whitespace, heading lines and front matter, so
        # anything visible between two adjacent chunks is a heading: two sibling sections
        # of the same name, not one.
        if (adjacent and not gap.isspace() and gap) or _HEADING_LINE.search(gap):
            return False
    return True


def _span_size(run: list[ChunkHit]) -> float:
    """The merged span's characters, CJK ones weighted by `CJK_CHAR_WEIGHT` at the share
    they have in the run's own texts (the text between non-adjacent chunks is unknown).
    The span is the one `_section` cuts, lowest start to highest end, also when the hits'
    chunk order and offsets disagree (two versions of a note)."""
    chars = max(h.end_offset for h in run) - min(h.start_offset for h in run)
    texts = sum(len(h.content_md) for h in run)
    cjk = sum(len(CJK_CHAR.findall(h.content_md)) for h in run)
    return chars * (1 + (CJK_CHAR_WEIGHT - 1) * cjk / max(texts, 1))


def _section(run: list[ChunkHit], scorer: NoteScorer, content: TextWindows | None) -> SectionMatch:
    first = run[0]
    start = min(h.start_offset for h in run)
    end = max(h.end_offset for h in run)
    cut = content.cut(start, end) if content is not None and len(run) > 1 else None
    if len(run) == 1:
        text = first.content_md
    elif cut:  # not "": an empty span says nothing of the chunks (as before)
        text = cut
    else:
        parts = [first.content_md]
        for prev, hit in pairwise(run):
            if hit.chunk_index != prev.chunk_index + 1:
                parts.append(GAP_MARKER)
            parts.append(hit.content_md)
        text = "\n\n".join(parts)
    return SectionMatch(
        chunk_ids=[h.chunk_id for h in run],
        chunk_indexes=[h.chunk_index for h in run],
        heading_path=list(first.heading_path),
        section_path=first.section_path,
        content_md=text,
        start_offset=start,
        end_offset=end,
        score=scorer([h.score for h in run]),
        note_version=first.note_version,
        retriever_scores=_best(run, lambda h: h.retriever_scores, max),
        ranks=_best(run, lambda h: h.ranks, min),
    )


def _best(
    run: list[ChunkHit],
    of: Callable[[ChunkHit], Mapping[str, float]],
    pick: Callable[[float, float], float],
) -> dict[str, Any]:
    """Per retriever, the best (`pick`) of the run's values (`of`: scores or ranks)."""
    best: dict[str, Any] = {}
    for hit in run:
        for name, value in of(hit).items():
            best[name] = value if name not in best else pick(best[name], value)
    return best
