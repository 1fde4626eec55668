"""Every invariant on real, messy markdown (tests/fixtures/markdown, see SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.chunking import get_chunker
from api.chunking.parse import parse
from api.chunking.text import SourceText
from tests.chunking.chunk_invariants import (
    check_chunks,
    front_matter_end,
    minilm_tokenizer,
)

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "markdown"
FILES = sorted(p.name for p in CORPUS.glob("*.md") if p.name != "SOURCES.md")


def test_corpus_is_present() -> None:
    assert len(FILES) >= 7 and "commonmark_spec.md" in FILES


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize(
    ("strategy", "size"),
    [("hierarchical_markdown", 300), ("hierarchical_markdown", 50), ("fixed_tokens", 512),
     ("whole_note", 300)],
)  # fmt: skip
def test_invariants_on_real_markdown(name: str, strategy: str, size: int) -> None:
    text = (CORPUS / name).read_text(encoding="utf-8")
    chunker = get_chunker(strategy, max_chunk_tokens=size)  # type: ignore[arg-type]
    chunks = chunker.chunk_note(text, name.removesuffix(".md"))
    assert chunks
    check_chunks(chunks, text, name.removesuffix(".md"), chunker)


@pytest.mark.parametrize("name", FILES)
def test_invariants_with_the_local_model_tokenizer(name: str) -> None:
    text = (CORPUS / name).read_text(encoding="utf-8")
    chunker = get_chunker(
        "hierarchical_markdown",
        max_chunk_tokens=200,
        tokenizer=minilm_tokenizer(),
        max_input_tokens=254,
    )
    chunks = chunker.chunk_note(text, "Readme")
    check_chunks(chunks, text, "Readme", chunker)
    assert all(c.token_count <= 200 or c.chunk_type in ("code", "table") for c in chunks)


@pytest.mark.parametrize("name", FILES)
def test_bare_carriage_returns_give_the_structure_of_newlines(name: str) -> None:
    """A bare \\r is a CommonMark line ending: with every \\n of a real document made a
    bare \\r (same length), the parse finds the same blocks at the same offsets. (Before
    the parser read a copy with \\n, pulldown-cmark missed fences ended by \\r and turned
    the rest of the document into code.)"""
    text = (CORPUS / name).read_text(encoding="utf-8")
    body = text[front_matter_end(text) :]  # front matter is read as written: \\n only
    lf = parse(SourceText(body))
    cr = parse(SourceText(body.replace("\n", "\r")))
    assert any(b.kind == "code" for b in lf.blocks)
    assert cr.top == lf.top
    assert cr.blocks == lf.blocks


def test_commonmark_spec_structure_is_recognised() -> None:
    text = (CORPUS / "commonmark_spec.md").read_text(encoding="utf-8")
    chunks = get_chunker("hierarchical_markdown").chunk_note(text, "CommonMark Spec")
    assert not any("title: CommonMark Spec" in c.content_md for c in chunks)  # front matter
    assert ["CommonMark Spec", "Leaf blocks", "Setext headings"] in [c.heading_path for c in chunks]
    assert all(c.token_count <= 300 for c in chunks)
