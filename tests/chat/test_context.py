"""`build_context` (pure): numbered sections within the token budget, at bounded cost."""

from __future__ import annotations

from datetime import UTC, datetime

from api.chat.context import build_context
from api.retrieval.types import NoteResult, SectionMatch
from api.tokenizer import tiktoken_tokenizer


def _note(note_id: str, text: str, score: float = 1.0) -> NoteResult:
    section = SectionMatch(
        chunk_ids=["c"],
        chunk_indexes=[0],
        heading_path=["Title"],
        section_path="Title",
        content_md=text,
        start_offset=0,
        end_offset=len(text),
        score=score,
    )
    return NoteResult(
        note_id=note_id,
        title="Title",
        tags=[],
        updated_at=datetime.now(UTC),
        score=score,
        matching_chunks=[section],
    )


def test_a_huge_section_is_cut_before_it_is_tokenised() -> None:
    """A 2 MB section (one chunk: the local model reads each 8 000-letter word as one
    unknown token) is cut to the budget's worth of characters before it is tokenised, not
    counted whole and binary-searched prefix by prefix."""
    count = tiktoken_tokenizer("cl100k_base").count
    counted: list[int] = []

    def counting(text: str) -> int:
        counted.append(len(text))
        return count(text)

    word = "q" * 8_000
    huge = " ".join([word] * 240)
    small = "The backup runs nightly at 02:00 UTC."
    context, citations = build_context(
        [_note("a", huge, 2.0), _note("b", small)], budget_tokens=3000, count_tokens=counting
    )
    assert sum(counted) < 2_000_000, sum(counted)  # the section alone is 1 920 239
    assert [c.ref for c in citations] == [1, 2] or [c.ref for c in citations] == [1]
    assert citations[0].text.endswith(" …") and len(citations[0].text) < len(huge)
    assert count(context) <= 3000
    assert citations[0].snippet.startswith("qqqq") and len(citations[0].snippet) <= 241


def test_a_section_that_fits_is_given_whole() -> None:
    text = "## Restore\n\nUse pg_restore --clean on the dump. " * 20
    context, citations = build_context(
        [_note("a", text)], budget_tokens=3000, count_tokens=tiktoken_tokenizer().count
    )
    assert citations[0].text == text and text in context.replace("\n</section-data>", "")


def test_a_pasted_images_base64_is_not_given_to_the_model() -> None:
    """A section holding a 300 KB pasted image does not fill the budget with base64: the
    model reads the image's place and alt text, and the words after it."""
    count = tiktoken_tokenizer("cl100k_base").count
    payload = "iVBORw0KGgoAAAANSUhEUgAA" * 12_500
    image = f"![route map](data:image/png;base64,{payload})"
    text = f"The route we took:\n\n{image}\n\nThen the museum."
    context, (citation,) = build_context([_note("a", text)], budget_tokens=500, count_tokens=count)
    assert citation.text == (
        "The route we took:\n\n![route map](data:image/png;base64,…)\n\nThen the museum."
    )
    assert "iVBOR" not in context and "Then the museum." in context
    assert "iVBOR" not in citation.snippet
    assert (citation.start_offset, citation.end_offset) == (0, len(text))  # the note's
