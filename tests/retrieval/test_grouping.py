"""Grouping hits into notes: note scorers, section merging, limits, guards."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import pytest

from api.retrieval.grouping import (
    GAP_MARKER,
    NOTE_SCORERS,
    group_by_note,
    max_decayed_sum,
    max_score,
    newest_version_per_note,
    rank_note_ids,
    resolve_note_scorer,
    sum_scores,
    weighted_max_sum,
)
from api.retrieval.types import ChunkHit, NoteMeta
from tests.retrieval.builders import hit, note


def test_scorers_hand_computed() -> None:
    assert weighted_max_sum([0.5, 0.3]) == pytest.approx(0.7 * 0.5 + 0.3 * 0.8)
    assert max_score([0.2, 0.8, 0.4]) == pytest.approx(0.8)
    assert max_decayed_sum([0.2, 0.8, 0.4]) == pytest.approx(0.8 + 0.5 * 0.4 + 0.25 * 0.2)
    assert max_decayed_sum([0.2, 0.8], decay=0.1) == pytest.approx(0.8 + 0.02)
    assert sum_scores([0.2, 0.8]) == pytest.approx(1.0)
    for scorer in NOTE_SCORERS.values():
        assert scorer([]) == 0.0


def test_resolve_note_scorer() -> None:
    assert resolve_note_scorer("max") is max_score
    bound = resolve_note_scorer("weighted_max_sum", max_weight=1.0, sum_weight=0.0)
    assert bound([0.4, 0.3]) == pytest.approx(0.4)
    custom = partial(max_decayed_sum, decay=0.0)
    assert resolve_note_scorer(custom)([0.4, 0.3]) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="unknown note scorer"):
        resolve_note_scorer("nope")


def _two_notes() -> tuple[list, dict[str, NoteMeta]]:
    # Note A: one strong chunk. Note B: three medium chunks in different sections.
    hits = [
        hit("A", 0, 0.9),
        hit("B", 0, 0.5, start=0),
        hit("B", 1, 0.5, start=100),
        hit("B", 2, 0.5, start=200),
    ]
    return hits, {"A": note("A"), "B": note("B")}


@pytest.mark.parametrize(
    ("scorer", "expected_order", "expected_scores"),
    [
        ("weighted_max_sum", ["A", "B"], {"A": 0.9, "B": 0.35 + 0.45}),
        ("max", ["A", "B"], {"A": 0.9, "B": 0.5}),
        ("sum", ["B", "A"], {"A": 0.9, "B": 1.5}),
        ("max_decayed_sum", ["A", "B"], {"A": 0.9, "B": 0.5 + 0.25 + 0.125}),
    ],
)
def test_note_score_comes_from_the_chosen_scorer(
    scorer: str, expected_order: list[str], expected_scores: dict[str, float]
) -> None:
    hits, notes = _two_notes()
    results = group_by_note(hits, notes, limit=10, chunks_per_note=5, score=scorer)
    assert [r.note_id for r in results] == expected_order
    assert {r.note_id: r.score for r in results} == pytest.approx(expected_scores)


def test_result_fields_and_limits() -> None:
    hits, notes = _two_notes()
    results = group_by_note(hits, notes, limit=1, chunks_per_note=2)
    assert len(results) == 1
    top = results[0]
    assert (top.note_id, top.title, top.tags) == ("A", "Note A", [])
    assert top.updated_at == notes["A"].updated_at
    results = group_by_note(hits, notes, limit=5, chunks_per_note=2)
    b = results[1]
    assert len(b.matching_chunks) == 2  # three sections, capped at two
    # Equal scores: ordered by position in the note.
    assert [s.start_offset for s in b.matching_chunks] == [0, 100]
    with pytest.raises(ValueError):
        group_by_note(hits, notes, limit=5, chunks_per_note=0)
    assert group_by_note(hits, notes, limit=0, chunks_per_note=1) == []


def test_sections_ordered_by_score() -> None:
    hits = [hit("A", 0, 0.2, start=0), hit("A", 1, 0.8, start=50), hit("A", 2, 0.5, start=90)]
    (result,) = group_by_note(hits, {"A": note("A")}, limit=3, chunks_per_note=3, score="max")
    assert [s.chunk_indexes for s in result.matching_chunks] == [[1], [2], [0]]
    assert [s.score for s in result.matching_chunks] == pytest.approx([0.8, 0.5, 0.2])


def test_adjacent_chunks_of_one_section_merge_into_one_span() -> None:
    path = ["Guide", "Install"]
    content = "# Guide\n\n## Install\n\nFirst part of install.\n\nSecond part of install.\n"
    s1 = content.index("First")
    s2 = content.index("Second")
    first = hit("A", 3, 0.6, heading=path, start=s1, text="First part of install.")
    second = hit("A", 4, 0.4, heading=path, start=s2, text="Second part of install.")
    other = hit("A", 7, 0.3, heading=["Guide", "Usage"], start=200, text="usage")
    notes = {"A": note("A")}

    (result,) = group_by_note([second, other, first], notes, limit=1, chunks_per_note=5)
    merged = result.matching_chunks[0]
    assert merged.chunk_indexes == [3, 4]
    assert merged.chunk_ids == [first.chunk_id, second.chunk_id]
    assert (merged.start_offset, merged.end_offset) == (s1, second.end_offset)
    assert merged.heading_path == path and merged.section_path == "Guide > Install"
    assert merged.content_md == "First part of install.\n\nSecond part of install."
    assert merged.score == pytest.approx(weighted_max_sum([0.6, 0.4]))
    assert len(result.matching_chunks) == 2

    # With the note text, the content is the exact slice of the merged span.
    (exact,) = group_by_note(
        [first, second], notes, limit=1, chunks_per_note=5, note_contents={"A": content}
    )
    section = exact.matching_chunks[0]
    assert section.content_md == content[section.start_offset : section.end_offset]


def test_gap_inside_a_section_is_marked_or_sliced() -> None:
    path = ["T", "Long section"]
    content = "## Long section\n\nalpha one.\n\nbeta two.\n\ngamma three.\n"
    a = hit("A", 0, 0.9, heading=path, start=content.index("alpha"), text="alpha one.")
    c = hit("A", 2, 0.7, heading=path, start=content.index("gamma"), text="gamma three.")
    notes = {"A": note("A")}
    (joined,) = group_by_note([a, c], notes, limit=1, chunks_per_note=3)
    assert joined.matching_chunks[0].content_md == f"alpha one.\n\n{GAP_MARKER}\n\ngamma three."
    (sliced,) = group_by_note(
        [a, c], notes, limit=1, chunks_per_note=3, note_contents={"A": content}
    )
    assert sliced.matching_chunks[0].content_md == "alpha one.\n\nbeta two.\n\ngamma three."
    # A gap wider than max_section_chars is not bridged.
    (split,) = group_by_note([a, c], notes, limit=1, chunks_per_note=3, max_section_chars=10)
    assert [s.chunk_indexes for s in split.matching_chunks] == [[0], [2]]


def test_matched_chunk_of_another_section_between_prevents_merge() -> None:
    same = ["T", "A"]
    hits = [
        hit("N", 0, 0.5, heading=same, start=0),
        hit("N", 1, 0.5, heading=["T", "A", "Sub"], start=100),
        hit("N", 2, 0.5, heading=same, start=200),
    ]
    (result,) = group_by_note(hits, {"N": note("N")}, limit=1, chunks_per_note=5)
    assert sorted(s.chunk_indexes for s in result.matching_chunks) == [[0], [1], [2]]


def _sections_of_two_hits(
    content: str, heading: str, first: str, second: str, second_index: int = 1
) -> list[list[int]]:
    """The chunk indexes of each section that chunk 0 (`first`) and chunk `second_index`
    (`second`), both under `heading`, group into when the note's text is known."""
    path = ["T", heading]
    a = hit("N", 0, 0.5, heading=path, start=content.index(first), text=first)
    b = hit("N", second_index, 0.5, heading=path, start=content.index(second), text=second)
    (result,) = group_by_note(
        [a, b], {"N": note("N")}, limit=1, chunks_per_note=5, note_contents={"N": content}
    )
    return [s.chunk_indexes for s in result.matching_chunks]


@pytest.mark.parametrize(
    "content",
    [
        "## Example\n\nfirst example body\n\n## Example\n\nsecond example body\n",
        "Example\n-------\n\nfirst example body\n\nExample\n-------\n\nsecond example body\n",
        "## Example\r\rfirst example body\r\r## Example\r\rsecond example body\r",
        "Example\r=======\r\rfirst example body\r\rExample\r=======\r\rsecond example body",
    ],
    ids=["atx", "setext", "bare-cr-atx", "bare-cr-setext"],
)
def test_sibling_sections_of_one_name_stay_apart_for_every_heading_form(content: str) -> None:
    """Two sibling sections with the same title stay two when the text is known, whatever
    the heading form between them (setext headings and bare-\\r lines included)."""
    sections = _sections_of_two_hits(
        content, "Example", "first example body", "second example body"
    )
    assert sections == [[0], [1]]


def test_a_dash_line_in_code_between_two_matched_chunks_is_no_heading() -> None:
    """Between chunks that are not adjacent only ATX headings are sought: a YAML `---` in
    an unmatched code chunk between them does not split the section in two."""
    content = "## Deploy\n\nfirst step body\n\n```yaml\na: 1\n---\nb: 2\n```\n\nlast step body\n"
    sections = _sections_of_two_hits(content, "Deploy", "first step body", "last step body", 2)
    assert sections == [[0, 2]]


def _spans(hits: list, content: str | None = None, **kwargs: int) -> list[list[int]]:
    contents = None if content is None else {"N": content}
    (result,) = group_by_note(
        hits, {"N": note("N")}, limit=1, chunks_per_note=9, note_contents=contents, **kwargs
    )
    return sorted(s.chunk_indexes for s in result.matching_chunks)


def test_the_section_index_keeps_sibling_sections_apart_without_the_note_text() -> None:
    """While a content edit waits to be indexed the note text is not the indexed one; the
    chunks' section index still keeps two adjacent sibling sections of one name apart."""
    path = ["T", "Setup"]
    first = hit("N", 0, 0.5, heading=path, start=10, text="Install it.", section=0)
    second = hit("N", 1, 0.5, heading=path, start=40, text="Configure it.", section=1)
    assert _spans([first, second]) == [[0], [1]]


def test_the_section_index_keeps_apart_same_named_sections_around_another() -> None:
    """Setup / Billing / Setup (setext): the two Setup chunks do not merge across the
    Billing section, whose heading line is not ATX."""
    content = (
        "Setup\n=====\n\nInstall the zebra.\n\nBilling\n=======\n\nInvoices monthly.\n\n"
        "Setup\n=====\n\nConfigure the zebra.\n"
    )
    path = ["T", "Setup"]
    a = hit("N", 0, 0.5, heading=path, start=content.index("Install"), text="Install the zebra.")
    b = hit(
        "N", 2, 0.5, heading=path, start=content.index("Configure"), text="Configure the zebra."
    )
    assert _spans([a, b], content) == [[0, 2]]  # chunks without an index: as before
    a, b = (replace(h, section_index=s) for h, s in ((a, 0), (b, 2)))
    assert _spans([a, b], content) == [[0], [2]]


def test_a_hash_line_in_code_does_not_split_one_indexed_section() -> None:
    """With section indexes the text between two matched chunks is not searched for
    heading lines, so a `# comment` in an unmatched code chunk no longer splits a section."""
    content = "## Deploy\n\nfirst step\n\n```sh\n# build it\nmake\n```\n\nlast step\n"
    path = ["T", "Deploy"]
    a = hit("N", 0, 0.5, heading=path, start=content.index("first"), text="first step")
    b = hit("N", 2, 0.5, heading=path, start=content.index("last"), text="last step")
    assert _spans([a, b], content) == [[0], [2]]  # legacy chunks: the '#' line splits
    a, b = (replace(h, section_index=0) for h in (a, b))
    assert _spans([a, b], content) == [[0, 2]]


def test_adjacent_chunks_merge_only_within_max_section_chars() -> None:
    """A long section whose chunks all match becomes several spans: adjacent merges stop at
    max_section_chars as gap merges do, so the passage that matched is not cut away."""
    hits = [
        hit("N", i, 0.5, heading=["T", "Runbook"], start=i * 3000, text="x" * 2990, section=0)
        for i in range(5)
    ]
    assert _spans(hits, max_section_chars=6000) == [[0, 1], [2, 3], [4]]
    assert _spans(hits, max_section_chars=None) == [[0, 1, 2, 3, 4]]


def test_hits_outside_the_allowed_notes_or_versions_are_dropped() -> None:
    meta = note("A")
    current = NoteMeta(
        note_id="A",
        author_id="alice",
        title="A",
        tags=[],
        updated_at=meta.updated_at,
        indexed_version=2,
    )
    hits = [
        hit("A", 0, 0.9, version=1),  # stale version
        hit("A", 1, 0.4, version=2),
        hit("X", 0, 0.99),  # note the caller did not allow
        hit("A", 2, 0.95, author_id="mallory", version=2),  # author mismatch
    ]
    (result,) = group_by_note(hits, {"A": current}, limit=5, chunks_per_note=5, score="max")
    assert [s.chunk_ids for s in result.matching_chunks] == [["A:1"]]
    assert result.score == pytest.approx(0.4)


def test_duplicate_chunk_counts_once_with_best_score() -> None:
    hits = [hit("A", 0, 0.3), hit("A", 0, 0.6)]
    (result,) = group_by_note(hits, {"A": note("A")}, limit=1, chunks_per_note=5, score="sum")
    assert result.score == pytest.approx(0.6)
    assert len(result.matching_chunks) == 1


@pytest.mark.parametrize("scorer", sorted(NOTE_SCORERS))
@pytest.mark.parametrize("seed", range(5))
def test_rank_note_ids_orders_notes_as_grouping_does(scorer: str, seed: int) -> None:
    """Search re-checks only the best candidate notes, in `rank_note_ids` order; that is
    correct only if grouping ranks any allowed subset of them the same way (duplicate
    chunks, ties and another author's hits included)."""
    import random

    rng = random.Random(seed)
    hits = [
        hit(
            f"n{rng.randrange(12):02d}",
            rng.randrange(5),
            round(rng.random(), 2),  # coarse scores: ties happen
            author_id="alice" if rng.random() > 0.1 else "bob",
        )
        for _ in range(60)
    ]
    ranked = rank_note_ids(hits, author_id="alice", score=scorer)
    assert len(ranked) == len(set(ranked))
    assert set(ranked) == {h.note_id for h in hits if h.author_id == "alice"}
    for _ in range(5):
        allowed = {n for n in ranked if rng.random() > 0.3}
        metas = {n: note(n) for n in allowed}
        grouped = group_by_note(hits, metas, limit=100, chunks_per_note=3, score=scorer)
        assert [r.note_id for r in grouped] == [n for n in ranked if n in allowed]


@pytest.mark.parametrize(
    ("stored", "expected"),
    [({"section_index": 3}, 3), ({}, None), ({"section_index": None}, None)]
    + [({"section_index": v}, None) for v in (True, "3", 3.0)],
)
def test_stored_section_index_is_read_whole_or_not_at_all(
    stored: dict, expected: int | None
) -> None:
    """Chunks indexed before chunks carried a section index (or holding junk there) read
    as None, and grouping falls back on their heading path and the note text."""
    from bson import ObjectId

    from api.retrieval.local.sync import chunk_record

    doc = {
        "_id": ObjectId(),
        "note_id": ObjectId(),
        "author_id": ObjectId(),
        "note_version": 1,
        "chunk_index": 0,
        "heading_path": ["T"],
        "content_md": "x",
        "embedding": [1.0, 0.0],
        **stored,
    }
    assert ChunkHit.from_document(doc).section_index == expected
    assert chunk_record(doc).section_index == expected


def test_cjk_text_weighs_more_against_max_section_chars() -> None:
    """CJK characters count about a token each (English: four characters a token) against
    max_section_chars, so a long Japanese section splits into spans that fit chat's
    context."""

    def section(text: str) -> list[ChunkHit]:
        step = len(text) + 2
        return [
            hit("N", i, 0.5, heading=["T", "S"], start=i * step, text=text, section=0)
            for i in range(4)
        ]

    assert _spans(section("x" * 1000)) == [[0, 1, 2, 3]]  # 4 006 characters
    assert _spans(section("東" * 1000)) == [[0], [1], [2], [3]]  # weighed as 4 000 each
    assert _spans(section("東" * 500 + "x" * 500)) == [[0, 1], [2, 3]]


def test_a_result_holds_one_version_of_each_note() -> None:
    """Atlas runs the vector and keyword queries side by side: a re-index committing
    between them fused version 1 and version 2 chunks of one note into one result."""
    hits = [
        hit("A", 0, 0.9, version=1),
        hit("A", 1, 0.8, version=2),
        hit("B", 0, 0.7, version=5),
        hit("A", 2, 0.6, version=2),
        hit("A", 3, 0.5, version=1),
    ]
    kept = newest_version_per_note(hits)
    assert [(h.note_id, h.chunk_index, h.note_version) for h in kept] == [
        ("A", 1, 2),
        ("B", 0, 5),
        ("A", 2, 2),
    ]
    assert newest_version_per_note([]) == []


def test_notes_of_one_score_keep_fusions_order_not_their_ids_order() -> None:
    """Note ids are random, so breaking ties by id ranked equal notes differently in every
    database (the retrieval benchmark's `max` rows moved between runs of the same code)."""
    hits = [hit("z", 0, 0.5), hit("m", 1, 0.5), hit("a", 2, 0.5), hit("m", 3, 0.2)]
    metas = {n: note(n) for n in "amz"}
    assert rank_note_ids(hits, author_id="alice", score="max") == ["z", "m", "a"]
    grouped = group_by_note(hits, metas, limit=3, chunks_per_note=1, score="max")
    assert [r.note_id for r in grouped] == ["z", "m", "a"]
    # A better score still wins, wherever its first hit is.
    grouped = group_by_note(hits, metas, limit=3, chunks_per_note=1, score="sum")
    assert [r.note_id for r in grouped] == ["m", "z", "a"]
