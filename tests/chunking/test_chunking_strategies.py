"""The strategy factory, the legacy and whole-note strategies, and `chunking_version`."""

from __future__ import annotations

import itertools

import pytest

from api.chunking import (
    ALGORITHM_REVISION,
    STRATEGIES,
    Chunker,
    FixedTokenChunker,
    MarkdownChunker,
    WholeNoteChunker,
    get_chunker,
)
from api.tokenizer import tiktoken_tokenizer
from tests.chunking.chunk_invariants import check_chunks, minilm_tokenizer

PROSE = "Every sentence in this note is plain prose about chunking and retrieval. " * 40


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_factory_builds_every_strategy(strategy: str) -> None:
    chunker = get_chunker(strategy, max_chunk_tokens=128)  # type: ignore[arg-type]
    assert isinstance(chunker, Chunker)
    assert chunker.strategy == strategy
    assert chunker.version.startswith(f"{strategy}:r{ALGORITHM_REVISION}:tiktoken:cl100k_base")
    assert chunker.chunk_note("# H\n\nbody", "T")


def test_version_changes_with_every_parameter_that_changes_output() -> None:
    variants: list[Chunker] = [
        MarkdownChunker(),
        MarkdownChunker(max_chunk_tokens=200),
        MarkdownChunker(min_chunk_tokens=10),
        MarkdownChunker(preserve_code_blocks=False),
        MarkdownChunker(max_input_tokens=254),
        MarkdownChunker(table_max_tokens=1000),
        MarkdownChunker(tokenizer=tiktoken_tokenizer("o200k_base")),
        MarkdownChunker(tokenizer=minilm_tokenizer()),
        get_chunker("fixed_tokens"),
        FixedTokenChunker(300, overlap_tokens=10),
        get_chunker("whole_note"),
    ]
    versions = [v.version for v in variants]
    assert len(set(versions)) == len(versions)
    assert MarkdownChunker().version == versions[0]  # stable for equal parameters


def test_fixed_tokens_windows_overlap_and_fit() -> None:
    text = "---\ntitle: x\n---\n# Heading\n\n" + PROSE
    chunker = FixedTokenChunker(100)
    assert chunker.overlap_tokens == 20
    chunks = chunker.chunk_note(text, "Legacy")
    check_chunks(chunks, text, "Legacy", chunker)
    assert len(chunks) > 3
    assert chunks[0].content_md.startswith("# Heading")  # headings stay in the text
    assert all(c.heading_path == ["Legacy"] and c.chunk_type == "fixed" for c in chunks)
    for a, b in itertools.pairwise(chunks):
        shared = a.end_offset - b.start_offset
        assert shared > 0  # consecutive windows overlap
        assert chunker.tokenizer.count(text[b.start_offset : a.end_offset]) <= 25
    assert all(c.token_count <= 100 for c in chunks)


def test_legacy_defaults_are_512_with_50_overlap() -> None:
    chunker = FixedTokenChunker()
    assert (chunker.max_chunk_tokens, chunker.overlap_tokens) == (512, 50)
    with pytest.raises(ValueError):
        FixedTokenChunker(100, overlap_tokens=100)


def test_whole_note_is_one_chunk_with_headings_inside() -> None:
    text = "---\ntags: [a]\n---\n# A\n\ntext a\n\n## B\n\ntext b\n"
    chunker = WholeNoteChunker()
    (chunk,) = chunker.chunk_note(text, "Whole")
    assert chunk.content_md == "# A\n\ntext a\n\n## B\n\ntext b"
    assert chunk.chunk_type == "note" and chunk.heading_path == ["Whole"]
    check_chunks([chunk], text, "Whole", chunker)


def test_whole_note_splits_only_above_the_hard_limit() -> None:
    text = "# A\n\n" + PROSE + "\n\n## B\n\n" + PROSE
    chunker = WholeNoteChunker(max_chunk_tokens=50, max_input_tokens=400)
    chunks = chunker.chunk_note(text, "Whole")
    check_chunks(chunks, text, "Whole", chunker)
    assert len(chunks) > 1
    assert all(c.token_count <= 400 for c in chunks)
    assert any(c.token_count > 50 for c in chunks)  # max_chunk_tokens does not apply
    assert len(WholeNoteChunker(max_input_tokens=8191).chunk_note(text, "Whole")) == 1
