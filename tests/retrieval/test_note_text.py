"""Search reads windows of a note's text, not the whole note: grouping with the windows
`section_windows` asks for gives exactly the sections it gives with the whole text."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.chunking import MarkdownChunker
from api.retrieval.grouping import group_by_note
from api.retrieval.note_text import MAX_OFFSET, MAX_WINDOWS, TextWindows, section_windows
from api.retrieval.types import ChunkHit
from tests.retrieval.builders import hit, note

FIXTURES = Path(__file__).parents[1] / "fixtures" / "markdown"


def test_a_cut_is_known_only_inside_one_window() -> None:
    text = "0123456789" * 5
    windows = TextWindows(((5, text[5:20]), (30, text[30:45])))
    assert windows.cut(5, 20) == text[5:20]
    assert windows.cut(7, 7) == ""
    assert windows.cut(31, 44) == text[31:44]
    for start, end in ((4, 10), (15, 21), (19, 31), (0, 50), (44, 46), (10, 9), (-1, 3)):
        assert windows.cut(start, end) is None, (start, end)
    whole = TextWindows.whole(text)
    assert whole.cut(0, 50) == text and whole.cut(49, 51) is None


def test_windows_cover_runs_of_one_section_and_nothing_else() -> None:
    path = ["T", "Setup"]
    hits = [
        hit("A", 0, 0.5, heading=path, start=100, text="x" * 50),
        hit("A", 1, 0.5, heading=path, start=200, text="x" * 50),
        hit("A", 2, 0.5, heading=path, start=9_000, text="x" * 50),
        hit("A", 5, 0.5, heading=["T", "Other"], start=20_000, text="x" * 50),
        hit("B", 0, 0.5, heading=path, start=0, text="x" * 50),  # alone in its section
    ]
    # A run starting at a hit spans at most max_section_chars: 100-1100 and 200-1200,
    # joined; the section's last hit starts no run with a later one.
    assert section_windows(hits, max_section_chars=1000) == {"A": [(100, 1200)]}
    # Unbounded sections need the whole run: first hit's start to last hit's end.
    assert section_windows(hits, max_section_chars=None) == {"A": [(100, 9_050)]}


def _chunk_hits(name: str) -> tuple[str, list[ChunkHit]]:
    content = (FIXTURES / name).read_text(encoding="utf-8")
    chunks = MarkdownChunker(max_chunk_tokens=120, min_chunk_tokens=20).chunk_note(content, "T")
    hits = [
        hit(
            "N",
            c.chunk_index,
            1.0 / (1 + c.chunk_index % 7),
            heading=c.heading_path,
            start=c.start_offset,
            end=c.end_offset,
            text=c.content_md,
            section=c.section_index,
        )
        for c in chunks
    ]
    return content, hits


CORPUS = {name: _chunk_hits(name) for name in ("commonmark_spec.md", "rich_readme.md")}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(CORPUS)),
    picks=st.lists(st.integers(min_value=0, max_value=10_000), min_size=2, max_size=40),
    max_chars=st.sampled_from([None, 80, 400, 1500, 6000]),
    legacy=st.booleans(),
)
def test_grouping_with_windows_equals_grouping_with_the_whole_text(
    name: str, picks: list[int], max_chars: int | None, legacy: bool
) -> None:
    """Hits drawn from real chunks (neighbours of one section included, since sections hold
    runs of adjacent chunks); `legacy` drops `section_index`, so merging falls back on the
    text between the chunks."""
    content, chunks = CORPUS[name]
    chosen: dict[int, ChunkHit] = {}
    for pick in picks:
        base = pick % len(chunks)
        for index in (base, min(base + pick % 3, len(chunks) - 1)):
            c = chunks[index]
            chosen[index] = c if not legacy else _without_section(c)
    hits = list(chosen.values())
    spans = section_windows(hits, max_section_chars=max_chars)
    windows = TextWindows(tuple((a, content[a:b]) for a, b in spans.get("N", [])))
    whole = _group(hits, content, max_chars)
    assert _group(hits, windows, max_chars) == whole
    assert len(spans.get("N", [])) <= MAX_WINDOWS


_ALPHABET = "ab \n#漢字"


@st.composite
def _arbitrary_hits(draw: st.DrawFn) -> tuple[str, list[ChunkHit], int | None]:
    """Hits as no chunker writes them: overlapping, nested, chunk order against offset
    order (two versions of a note), empty, past the note's end, CJK, some legacy."""
    content = draw(st.text(alphabet=_ALPHABET, max_size=400))
    hits = []
    for i in range(draw(st.integers(min_value=2, max_value=8))):
        start = draw(st.integers(min_value=0, max_value=450))
        hits.append(
            ChunkHit(
                chunk_id=f"N:{i}",
                note_id="N",
                author_id="alice",
                note_version=1,
                chunk_index=i,
                heading_path=["T", draw(st.sampled_from(["A", "A", "B"]))],
                section_path="",
                content_md=draw(st.text(alphabet=_ALPHABET, max_size=40)),
                start_offset=start,
                end_offset=start + draw(st.integers(min_value=0, max_value=120)),
                section_index=draw(st.sampled_from([None, 0])),
                score=1.0,
            )
        )
    return content, hits, draw(st.sampled_from([None, 20, 60, 150, 6000]))


@settings(max_examples=400, deadline=None)
@given(_arbitrary_hits())
def test_windows_equal_the_whole_text_for_any_hits(case: tuple) -> None:
    """Grouping with the windows gives what grouping with the whole text gives, for any
    hits: a merged span is measured as it is cut (lowest start to highest end), so hits
    whose offsets are out of chunk order never reach past the windows."""
    content, hits, max_chars = case
    spans = section_windows(hits, max_section_chars=max_chars)
    contents = {"N": TextWindows(tuple((a, content[a:b]) for a, b in spans["N"]))} if spans else {}
    whole = _group(hits, content, max_chars)
    assert (
        group_by_note(
            hits,
            {"N": note("N")},
            limit=1,
            chunks_per_note=100,
            note_contents=contents,
            max_section_chars=max_chars,
        )
        == whole
    )
    if max_chars is not None:
        for section in whole[0].matching_chunks:
            assert section.end_offset - section.start_offset <= max_chars or (
                len(section.chunk_ids) == 1
            )


def test_many_windows_are_joined_across_the_smallest_gaps() -> None:
    """Past `MAX_WINDOWS` windows per note the closest are joined (mongod's `$substrCP`
    walks from the string's start to each window)."""
    path = ["T", "Transcript"]
    starts = [0, 10_000, 10_500, 30_000, 31_000, 60_000, 90_000]
    hits = [hit("N", i, 0.5, heading=path, start=s, text="x" * 100) for i, s in enumerate(starts)]
    (windows,) = section_windows(hits, max_section_chars=200).values()
    assert len(windows) == MAX_WINDOWS == 4
    # Six windows (the last hit starts none) with gaps 9 800, 300, 19 300, 800, 29 800:
    # the 300 and the 800 ones are joined.
    assert windows == [(0, 200), (10_000, 10_700), (30_000, 31_200), (60_000, 60_200)]


def test_offsets_past_32_bits_are_left_to_the_chunks() -> None:
    """`$substrCP` takes 32-bit offsets: a corrupt stored offset failed the search (500)."""
    path = ["T", "S"]
    far = 2**31 + 5
    hits = [hit("N", 0, 0.5, heading=path, start=far), hit("N", 1, 0.5, heading=path, start=far)]
    assert section_windows(hits, max_section_chars=6000) == {}
    near = [hit("N", 0, 0.5, heading=path, start=MAX_OFFSET - 10), *hits]
    assert section_windows(near, max_section_chars=6000) == {"N": [(MAX_OFFSET - 10, MAX_OFFSET)]}


def _without_section(h: ChunkHit) -> ChunkHit:
    return replace(h, section_index=None)


def _group(hits: list[ChunkHit], text: str | TextWindows, max_chars: int | None) -> list:
    return group_by_note(
        hits,
        {"N": note("N")},
        limit=1,
        chunks_per_note=100,
        note_contents={"N": text},
        max_section_chars=max_chars,
    )


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_the_corpus_has_sections_of_several_chunks(name: str) -> None:
    """The property above is only worth something if merging really happens there."""
    _content, chunks = CORPUS[name]
    sections = [c.section_index for c in chunks]
    assert len(set(sections)) < len(sections) - 10
