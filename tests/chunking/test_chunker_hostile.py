"""Hostile inputs finish, stay lossless and keep every invariant.

The full-size cases (10 MB, 100 000 headings, 50 000-row table) run in the default suite.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from api.chunking import MarkdownChunker, get_chunker
from api.tokenizer import tiktoken_tokenizer
from api.tokenizer.encoders import TiktokenTokenizer
from tests.chunking.chunk_invariants import check_chunks

SPEC = (Path(__file__).resolve().parents[1] / "fixtures/markdown/commonmark_spec.md").read_text(
    encoding="utf-8"
)


class CountingTokenizer(TiktokenTokenizer):
    """cl100k_base, counting the characters the chunker hands it (its main cost)."""

    def __init__(self) -> None:
        super().__init__(tiktoken_tokenizer("cl100k_base").encoding)
        self.chars = 0

    def count(self, text: str) -> int:
        self.chars += len(text)
        return super().count(text)

    def count_batch(self, texts: list[str]) -> list[int]:
        self.chars += sum(map(len, texts))
        return super().count_batch(texts)

    def encode(self, text: str) -> list[int]:
        self.chars += len(text)
        return super().encode(text)

    def encode_array(self, text: str) -> np.ndarray:
        self.chars += len(text)
        return super().encode_array(text)


TOKENIZER = CountingTokenizer()


def run(text: str, **kwargs: int) -> tuple[list, int]:
    """The chunks of `text` (every invariant checked) and the characters the chunker had
    tokenised to make them."""
    chunker = MarkdownChunker(tokenizer=TOKENIZER, **kwargs)
    TOKENIZER.chars = 0
    chunks = chunker.chunk_note(text, "Hostile")
    tokenised = TOKENIZER.chars
    check_chunks(chunks, text, "Hostile", chunker)
    return chunks, tokenised


def headings(n: int) -> str:
    return "".join(f"{'#' * (i % 6 + 1)} Heading {i}\nbody {i}.\n" for i in range(n))


def table(rows: int) -> str:
    return "| id | value |\n|---|---|\n" + "".join(f"| {i} | value {i} |\n" for i in range(rows))


@pytest.mark.parametrize("copies", [5])
def test_big_note(copies: int) -> None:
    text = SPEC * copies
    chunks, tokenised = run(text)
    # One tokenizer pass over the note, and the short edges of its chunks.
    assert len(chunks) > 1000 and tokenised < 2 * len(text)


def test_ten_megabyte_note() -> None:
    text = SPEC * 50
    assert len(text.encode()) > 10_000_000
    chunks, tokenised = run(text)
    assert len(chunks) > 10_000 and tokenised < 2 * len(text)


def test_many_headings(n: int = 100_000) -> None:
    chunks, _ = run(headings(n))
    assert len(chunks) == n
    assert chunks[-1].content_md == f"body {n - 1}."


def test_headings_without_a_body_cost_no_breadcrumb_count() -> None:
    """Every heading's breadcrumb was tokenised, body or not: with the local model's
    tokenizer a 2 MB note of bare headings spent half its 7.8 s there."""
    from tests.chunking.chunk_invariants import minilm_tokenizer

    tokenizer = minilm_tokenizer()
    calls: list[str] = []
    real_count = tokenizer.count

    def count(text: str) -> int:
        calls.append(text)
        return real_count(text)

    tokenizer.count = count  # type: ignore[method-assign]
    text = "".join(f"## Empty {i}\n" for i in range(5_000)) + "## Last\n\nbody\n"
    chunker = MarkdownChunker(tokenizer=tokenizer, max_input_tokens=254)
    chunks = chunker.chunk_note(text, "Hostile")
    assert [c.heading_path for c in chunks] == [["Hostile", "Last"]]
    assert len(calls) < 10, len(calls)


def test_thousand_deep_nested_list() -> None:
    text = "## Deep\n\n" + "".join("  " * i + f"- item {i}\n" for i in range(1000))
    chunks, _ = run(text, max_chunk_tokens=300)
    assert all(c.token_count <= 300 for c in chunks)
    assert "item 999" in chunks[-1].content_md


def test_thousand_deep_block_quotes() -> None:
    one_line = ">" * 1000 + " deep text\n"
    chunks, _ = run(one_line)
    assert chunks[0].content_md == one_line.strip()
    nested = "".join(">" * i + f" line {i}\n" for i in range(1, 1001))
    chunks, _ = run(nested, max_chunk_tokens=200)
    assert len(chunks) > 1 and all(c.token_count <= 200 for c in chunks)


def test_deep_nesting_keeps_a_bounded_number_of_blocks() -> None:
    """A 2 MB note of nested quotes (`>` × 2 000 000) kept one Block per level: 855 MB and
    4.7 s. Levels below MAX_BLOCK_DEPTH read as their ancestor's text (the splitter never
    looks there), so the block count is bounded and every invariant still holds."""
    from api.chunking import parse as parser
    from api.chunking.text import SourceText

    deep = ">" * 200_000 + " text\n"
    assert len(parser.parse(SourceText(deep)).blocks) < 100
    MAX_BLOCK_DEPTH, parse = parser.MAX_BLOCK_DEPTH, parser.parse
    assert len(parse(SourceText(deep)).blocks) == MAX_BLOCK_DEPTH
    mixed = "".join(f"{'> ' * i}- item {i}\n{'> ' * i}\n" for i in range(80))
    doc = parse(SourceText(mixed))
    assert max(b.depth for b in doc.blocks) == MAX_BLOCK_DEPTH - 1
    chunks, _ = run(deep + mixed, max_chunk_tokens=100)
    assert any("item 79" in c.content_md for c in chunks)


def test_a_whitespace_run_tiktoken_cannot_encode_alone() -> None:
    """1 100 000 spaces (1.1 MB, under the 2 MB note limit) inside a paragraph and inside a
    code block: tiktoken gave up on the run (ValueError), so such a note failed to index."""
    run_ = " " * 1_100_000
    text = f"# Notes\n\nbefore{run_}after\n\n```\nx ={run_}1\n```\n\ntail\n"
    chunks, _ = run(text, max_chunk_tokens=300)
    assert "before" in chunks[0].content_md and "tail" in chunks[-1].content_md
    assert any(c.chunk_type == "code" for c in chunks)


def test_unclosed_fence_at_the_top() -> None:
    text = "```python\n" + "x = compute(1)\n# not a heading\n" * 5000
    chunks, _ = run(text, max_input_tokens=2000)
    assert len(chunks) > 1
    assert all(c.chunk_type == "code" and c.content_md.startswith("```python\n") for c in chunks)
    assert all(c.heading_path == ["Hostile"] for c in chunks)


def test_huge_table(rows: int = 50_000) -> None:
    chunks, _ = run(table(rows))
    assert all(c.chunk_type == "table" for c in chunks)
    assert sum(c.metadata["row_count"] for c in chunks) == rows
    assert all(c.content_md.startswith("| id | value |\n|---|---|\n") for c in chunks)


def test_nul_bytes_everywhere() -> None:
    text = "# \x00 title\n\n" + "a\x00b \x00 `\x00` [\x00](\x00)\n\n" * 2000 + "```\n\x00\n```\n"
    chunks, _ = run(text)
    assert sum(c.content_md.count("\x00") for c in chunks) == text.count("\x00") - 1


def test_emoji_cjk_rtl() -> None:
    line = "😀👩\u200d💻🇫🇷 中文内容日本語の文章。한국어 שלום עולם مرحبا بالعالم e\u0301\n"
    chunks, _ = run("## Ünïcode 🎉\n\n" + line * 3000, max_chunk_tokens=120)
    assert all(c.token_count <= 120 for c in chunks)


@pytest.mark.parametrize(
    "text",
    [
        "x" * 500_000,  # one word, no cut but tokens
        "word " * 100_000,  # one line, no sentence end
        "中文内容" * 50_000,  # CJK without punctuation
        "\n".join(["---"] * 10_000),  # thematic breaks only
        "[x]: /u\n" * 20_000,  # link reference definitions: no block at all
        "<div>\n" * 10_000,  # one endless HTML block
        "    code\n" * 20_000,  # one endless indented code block
        "- " * 20_000,  # a list of empty items on one line
        "*" * 100_000,  # delimiter runs
    ],
)
def test_degenerate_text(text: str) -> None:
    run(text, max_chunk_tokens=200)


@pytest.mark.parametrize("strategy", ["fixed_tokens", "whole_note"])
def test_other_strategies_survive_hostile_input(strategy: str) -> None:
    text = headings(2000) + table(2000) + "```\n" + "code\n" * 3000
    chunker = get_chunker(strategy, max_input_tokens=2000)  # type: ignore[arg-type]
    chunks = chunker.chunk_note(text, "Hostile")
    check_chunks(chunks, text, "Hostile", chunker)
