"""One test per rule of the hierarchical chunker (docs/chunking.md), on hand-written notes."""

from __future__ import annotations

import json
import statistics

import pytest

from api.chunking import MarkdownChunk, MarkdownChunker, get_chunker
from api.tokenizer import HuggingFaceTokenizer
from tests.chunking.chunk_invariants import check_chunks, minilm_tokenizer

LOREM = (
    "Chunking decides what retrieval can find. Every sentence here is ordinary prose. "
    "It carries enough words to cost a predictable number of tokens. "
)


def chunk(text: str, title: str = "Note", **kwargs: int | bool) -> list[MarkdownChunk]:
    """Chunk and check every invariant before the test looks at specifics."""
    chunker = MarkdownChunker(**kwargs)  # type: ignore[arg-type]
    chunks = chunker.chunk_note(text, title)
    check_chunks(chunks, text, title, chunker)
    return chunks


def paths(chunks: list[MarkdownChunk]) -> list[list[str]]:
    return [c.heading_path for c in chunks]


# Headings and breadcrumbs.


def test_heading_paths_follow_the_heading_tree() -> None:
    text = "# A\n\nintro\n\n## B\n\nb text\n\n### C\n\nc text\n\n## D\n\nd text\n\n# E\n\ne text\n"
    chunks = chunk(text)
    assert paths(chunks) == [
        ["Note", "A"],
        ["Note", "A", "B"],
        ["Note", "A", "B", "C"],
        ["Note", "A", "D"],
        ["Note", "E"],
    ]
    assert [c.content_md for c in chunks] == ["intro", "b text", "c text", "d text", "e text"]
    assert chunks[2].section_path == "Note > A > B > C"


def test_heading_lines_are_not_in_chunks_and_empty_sections_yield_nothing() -> None:
    chunks = chunk("# Only a heading\n\n## Another\n\n### Third\nbody\n")
    assert len(chunks) == 1
    assert chunks[0].content_md == "body"
    assert chunks[0].heading_path == ["Note", "Only a heading", "Another", "Third"]


def test_setext_headings_open_sections() -> None:
    text = "Title One\n=========\n\nfirst\n\nSub two\n-------\n\nsecond\n"
    chunks = chunk(text)
    assert paths(chunks) == [["Note", "Title One"], ["Note", "Title One", "Sub two"]]
    assert [c.content_md for c in chunks] == ["first", "second"]


def test_headings_inside_lists_and_quotes_are_content() -> None:
    text = "## Real\n\n- item\n  # not a section\n\n> # quoted\n> text\n"
    chunks = chunk(text)
    assert len(chunks) == 1
    assert chunks[0].heading_path == ["Note", "Real"]
    assert "# not a section" in chunks[0].content_md and "> # quoted" in chunks[0].content_md


def test_preamble_gets_the_title_and_blank_title_is_omitted() -> None:
    chunks = chunk("before any heading\n\n# H\n\nafter\n", title="   ")
    assert paths(chunks) == [[], ["H"]]
    assert chunks[0].embedding_text == "before any heading"
    assert chunks[1].embedding_text == "H\n\nafter"


def test_a_first_heading_repeating_the_title_is_not_doubled() -> None:
    chunks = chunk("# My Note\n\nbody\n\n## Part\n\nmore\n", title="My  note")
    assert paths(chunks) == [["My note"], ["My note", "Part"]]


def test_a_long_first_heading_repeating_the_title_is_not_doubled() -> None:
    """Heading texts are cut at 256 characters; a longer title is compared cut the same
    way (it appeared twice in the breadcrumb)."""
    title = "word " * 60
    chunks = chunk(f"# {title}\n\nBody text.\n", title=title)
    assert paths(chunks) == [[title.strip()]]


def test_a_title_with_a_lone_surrogate_is_cleaned_like_the_content() -> None:
    # Only reachable through the library (the API's JSON parsing rejects it); it raised
    # UnicodeEncodeError.
    chunks = MarkdownChunker().chunk_note("body \ud800 text", "a\ud800")
    assert paths(chunks) == [["a\ufffd"]]
    assert chunks[0].content_md == "body \ufffd text"


def test_heading_text_is_plain_text_and_empty_headings_are_skipped() -> None:
    chunks = chunk("## The `foo` *function*\n\n###\n\nbody\n")
    assert chunks[0].heading_path == ["Note", "The foo function"]


def test_tiny_sections_are_not_merged_together() -> None:
    text = "## A\none\n## B\ntwo\n## C\nthree\n"
    assert [c.content_md for c in chunk(text, min_chunk_tokens=50)] == ["one", "two", "three"]


# Front matter, BOM, line endings, odd characters.


@pytest.mark.parametrize(
    "front",
    ["---\ntitle: x\ntags: [a, b]\n---\n", "---\ntitle: x\n...\n", "+++\ntitle = 'x'\n+++\n"],
)
def test_front_matter_is_excluded(front: str) -> None:
    chunks = chunk(front + "\n# H\n\nbody\n")
    assert [c.content_md for c in chunks] == ["body"]


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("---\n```python\nprint(1)\n```\n---\nafter\n", "```python\nprint(1)\n```"),
        ("---\nFirst paragraph.\n\n- a list item\n\n---\n\nLast.\n", "First paragraph."),
    ],
)
def test_a_leading_block_that_is_not_metadata_stays_content(text: str, content: str) -> None:
    """Only YAML/TOML that loads as a mapping is front matter (and left out); a note that
    opens with a thematic break keeps everything up to the next one."""
    chunks = chunk(text)
    assert any(content in c.content_md for c in chunks)


def test_metadata_like_block_mid_document_stays_content() -> None:
    # A thematic break followed by a setext heading, not front matter.
    text = "intro\n\n---\nSome heading\n---\n\nbody\n"
    chunks = chunk(text)
    assert paths(chunks) == [["Note"], ["Note", "Some heading"]]


def test_bom_is_skipped_and_crlf_offsets_are_exact() -> None:
    text = "\ufeff# Title\r\n\r\nline one\r\nline two\r\n\r\n## Sub\r\n\r\nthird\r\n"
    chunks = chunk(text)
    assert paths(chunks) == [["Note", "Title"], ["Note", "Title", "Sub"]]
    assert chunks[0].content_md == "line one\r\nline two"
    assert text[chunks[1].start_offset : chunks[1].end_offset] == "third"


@pytest.mark.parametrize(
    "text",
    [
        "Intro paragraph.\r\r## A\r\rText of A.\r\r## B\r\rText of B.\r",  # bare CR
        "Intro paragraph.\r## A\n\nText of A.\r\n\r\n## B\rText of B.",  # all three mixed
    ],
)
def test_a_bare_carriage_return_ends_a_line(text: str) -> None:
    """CommonMark ends lines at \\n, \\r\\n or a bare \\r: the text before a heading that
    follows a bare \\r is its own section's, not dropped (it was, before line searches
    looked for \\r)."""
    chunks = chunk(text)
    assert paths(chunks) == [["Note"], ["Note", "A"], ["Note", "B"]]
    assert [text[c.start_offset : c.end_offset] for c in chunks] == [
        "Intro paragraph.",
        "Text of A.",
        "Text of B.",
    ]
    assert [c.content_md for c in chunks] == ["Intro paragraph.", "Text of A.", "Text of B."]


def test_a_fence_ended_by_bare_carriage_returns_is_closed() -> None:
    """pulldown-cmark misses a fence whose lines end in a bare \\r: the rest of the note
    became one code block and heading B its content. The note is parsed with each bare \\r
    read as \\n, one character for one, so the chunks are those of the \\n note."""
    lf = "# A\n\n```py\nx = 1\n```\n\nAfter the fence.\n\n# B\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    cr = lf.replace("\n", "\r")
    chunks = chunk(cr)
    assert paths(chunks) == [["Note", "A"], ["Note", "B"]]
    assert chunks[0].content_md == "```py\rx = 1\r```\r\rAfter the fence."
    assert [(c.start_offset, c.end_offset) for c in chunks] == [
        (c.start_offset, c.end_offset) for c in chunk(lf)
    ]
    code = chunk(cr, max_chunk_tokens=5, min_chunk_tokens=0)
    assert [c.chunk_type for c in code] == ["code", "paragraph", "table"]
    assert code[0].metadata["language"] == "py"


def test_unicode_offsets_are_character_offsets() -> None:
    text = "# 标题 🎉\n\nשלום עולם — مرحبا 👩\u200d💻 日本語の文章。\n\n## Ünï\n\ncafé\n"
    chunks = chunk(text)
    assert [text[c.start_offset : c.end_offset] for c in chunks] == [
        "שלום עולם — مرحبا 👩\u200d💻 日本語の文章。",
        "café",
    ]
    assert chunks[0].heading_path == ["Note", "标题 🎉"]


def test_nul_bytes_and_lone_surrogates_do_not_break_offsets() -> None:
    text = "# H\x00x\n\na\x00b\n\n## Z\n\nc"
    chunks = chunk(text)
    assert [c.content_md for c in chunks] == ["a\x00b", "c"]
    broken = "# H\n\nbad \ud800 text"
    got = MarkdownChunker().chunk_note(broken, "N")
    # Not valid Unicode: replaced one-for-one so offsets still index the original.
    assert got[0].content_md == "bad \ufffd text"
    assert broken[got[0].start_offset : got[0].end_offset].startswith("bad ")


@pytest.mark.parametrize("text", ["", " ", "\n\n\t  \r\n", "\u3000\n"])
@pytest.mark.parametrize("strategy", ["hierarchical_markdown", "fixed_tokens", "whole_note"])
def test_blank_input_gives_only_a_title_chunk(text: str, strategy: str) -> None:
    """A note with nothing but its title is still found by it: one `outline` chunk with
    empty content (offsets 0, 0) whose embedded text is the title; none without a title."""
    chunker = get_chunker(strategy)  # type: ignore[arg-type]
    (only,) = chunker.chunk_note(text, "T")
    assert (only.chunk_type, only.content_md, only.heading_path) == ("outline", "", ["T"])
    assert (only.start_offset, only.end_offset, only.embedding_text) == (0, 0, "T")
    check_chunks([only], text, "T", chunker)
    assert chunker.chunk_note(text, " ") == []


def test_front_matter_only_gives_only_a_title_chunk() -> None:
    text = "---\ntitle: only metadata\n---\n"
    (only,) = chunk(text)
    assert (only.chunk_type, only.content_md, only.start_offset) == ("outline", "", len(text))
    assert chunk(text, title="") == []


def test_a_note_of_headings_only_is_one_outline_chunk() -> None:
    """Headings with no body anywhere: one chunk holding the heading lines, under the
    title, so the note is found by its title and headings. A note with any body text
    keeps the rule that a heading with no body of its own yields no chunk."""
    text = "# Title\n## Kubernetes zebra\n\n### Empty too\n"
    (only,) = chunk(text, title="Infra")
    assert only.chunk_type == "outline" and only.heading_path == ["Infra"]
    assert only.content_md == "# Title\n## Kubernetes zebra\n\n### Empty too"
    assert only.embedding_text == "Infra\n\n" + only.content_md
    with_body = chunk(text + "\nBody.\n", title="Infra")
    assert [c.content_md for c in with_body] == ["Body."]
    assert with_body[0].heading_path == ["Infra", "Title", "Kubernetes zebra", "Empty too"]


def test_an_outline_holds_the_headings_that_fit() -> None:
    text = "\n".join(f"# Heading number {i}" for i in range(400))
    (only,) = chunk(text, max_chunk_tokens=50)
    assert only.chunk_type == "outline" and 40 <= only.token_count <= 50
    assert only.content_md.startswith("# Heading number 0\n# Heading number 1\n")


# Code blocks.


def test_code_block_is_kept_whole_above_max_chunk_tokens() -> None:
    code = "\n".join(f"    value_{i} = compute({i}) + other_{i}" for i in range(40))
    text = f"## Code\n\nBefore the code.\n\n```python\n{code}\n```\n\nAfter the code.\n"
    chunks = chunk(text, max_chunk_tokens=60, min_chunk_tokens=0)
    (code_chunk,) = [c for c in chunks if c.chunk_type == "code"]
    assert code_chunk.token_count > 60
    assert code_chunk.content_md == f"```python\n{code}\n```"
    assert code_chunk.metadata == {"language": "python"}
    assert [c.content_md for c in chunks if c.chunk_type != "code"] == [
        "Before the code.",
        "After the code.",
    ]


@pytest.mark.parametrize(
    ("info", "language"),
    [
        ('python title="app.py"', "python"),  # Docusaurus / MkDocs options after a space
        ("python{1,3}", "python"),  # VitePress line highlights
        ("js:title=app.js", "js"),  # Gatsby options after a colon
        ("{r, echo=FALSE}", "r"),  # R Markdown chunk
        ("{python}", "python"),  # Quarto executable cell
        ("{#snippet .haskell}", "haskell"),  # pandoc attributes: the class
        ("{=html}", "html"),  # pandoc raw block
        ("{#only-an-id}", None),
        ("", None),
    ],
)
def test_code_language_from_common_info_strings(info: str, language: str | None) -> None:
    text = f"## Snippet\n\n```{info}\nx = 1\n```\n"
    (code_chunk,) = [c for c in chunk(text) if c.chunk_type == "code"]
    assert code_chunk.metadata == {"language": language}


@pytest.mark.parametrize(("open_fence", "close_fence"), [("~~~js extra", "~~~"), ("````", "````")])
def test_code_above_the_hard_limit_is_split_by_lines_and_refenced(
    open_fence: str, close_fence: str
) -> None:
    lines = [f"let value{i} = compute({i});" for i in range(60)]
    text = "## Big\n\n" + open_fence + "\n" + "\n".join(lines) + "\n" + close_fence + "\n"
    chunks = chunk(text, max_chunk_tokens=40, min_chunk_tokens=0, max_input_tokens=120)
    assert len(chunks) > 1 and all(c.chunk_type == "code" for c in chunks)
    for i, c in enumerate(chunks, start=1):
        assert c.content_md.startswith(open_fence + "\n")
        assert c.content_md.endswith("\n" + close_fence)
        assert c.metadata["code_part"] == i and c.metadata["code_parts"] == len(chunks)
        assert c.metadata["fence_closed"] is True
    body = [ln for c in chunks for ln in c.content_md.split("\n")[1:-1]]
    assert body == lines  # every line once, none cut
    assert text[chunks[0].start_offset :].startswith(open_fence)
    assert text[: chunks[-1].end_offset].endswith(close_fence)


def test_unclosed_fence_at_the_top_holds_the_rest_of_the_note() -> None:
    text = "```\nprint('x')\n# not a heading\n\nmore text\n"
    chunks = chunk(text)
    assert len(chunks) == 1
    assert chunks[0].chunk_type == "code" and chunks[0].heading_path == ["Note"]
    assert chunks[0].content_md == text.strip()


def test_unclosed_fence_fragments_are_closed_with_the_opening_marker() -> None:
    lines = [f"row {i} = value {i} * factor" for i in range(80)]
    text = "~~~~sql\n" + "\n".join(lines) + "\n"
    chunks = chunk(text, max_input_tokens=100)
    assert len(chunks) > 1
    assert all(c.content_md.endswith("\n~~~~") and not c.metadata["fence_closed"] for c in chunks)


def test_preserve_code_blocks_false_splits_code_at_max_chunk_tokens() -> None:
    lines = [f"let value{i} = compute({i});" for i in range(60)]
    text = "```js\n" + "\n".join(lines) + "\n```\n"
    chunks = chunk(text, max_chunk_tokens=50, preserve_code_blocks=False)
    assert len(chunks) > 1 and all(c.token_count <= 50 for c in chunks)


def test_indented_code_block_is_code() -> None:
    chunks = chunk("## I\n\n    x = 1\n    y = 2\n")
    assert chunks[0].chunk_type == "code" and chunks[0].metadata == {"language": None}


# Tables.


def _table(rows: int) -> tuple[str, list[str]]:
    header = "| id | name | description |\n|---:|:-----|-------------|"
    body = [f"| {i} | item {i} | the description of item number {i} |" for i in range(rows)]
    return header + "\n" + "\n".join(body), body


def test_table_within_the_table_limit_stays_whole() -> None:
    table, _ = _table(30)
    chunks = chunk("## T\n\n" + table + "\n", max_chunk_tokens=50)
    assert len(chunks) == 1 and chunks[0].token_count > 50
    assert chunks[0].chunk_type == "table"
    assert chunks[0].metadata == {
        "table_part": 1,
        "table_parts": 1,
        "row_count": 30,
        "header_repeated": False,
    }


def test_large_table_splits_by_rows_with_the_header_repeated() -> None:
    table, rows = _table(200)
    text = "## T\n\nIntro line.\n\n" + table + "\n\nOutro line.\n"
    chunks = chunk(text, max_chunk_tokens=100, min_chunk_tokens=0, table_max_tokens=400)
    parts = [c for c in chunks if c.chunk_type == "table"]
    header = "| id | name | description |\n|---:|:-----|-------------|\n"
    assert len(parts) > 1
    assert parts[0].content_md.startswith(header) and not parts[0].metadata["header_repeated"]
    for i, part in enumerate(parts, start=1):
        assert part.token_count <= 400
        assert part.content_md.startswith(header)
        assert part.metadata["table_part"] == i and part.metadata["table_parts"] == len(parts)
        if i > 1:
            assert part.metadata["header_repeated"]
            assert part.content_md == header + text[part.start_offset : part.end_offset]
    got_rows = [ln for p in parts for ln in p.content_md.split("\n")[2:]]
    assert got_rows == rows  # no row lost, cut or repeated
    assert sum(p.metadata["row_count"] for p in parts) == 200
    sizes = [p.token_count for p in parts]
    assert max(sizes) - min(sizes) < 60  # balanced, no tiny last part


# Lists, paragraphs, sentences, words.


def test_lists_are_split_between_items_only() -> None:
    items = [f"- item {i}: " + LOREM.strip() for i in range(12)]
    text = "## L\n\n" + "\n".join(items) + "\n"
    chunks = chunk(text, max_chunk_tokens=120, min_chunk_tokens=0)
    assert len(chunks) > 1 and all(c.chunk_type == "list" for c in chunks)
    assert [ln for c in chunks for ln in c.content_md.split("\n")] == items


def test_oversized_paragraph_splits_at_sentences() -> None:
    text = "## P\n\n" + LOREM * 12
    chunks = chunk(text, max_chunk_tokens=80, min_chunk_tokens=0)
    assert len(chunks) > 1
    assert all(c.content_md.endswith(".") for c in chunks)
    assert all(c.token_count <= 80 for c in chunks)


def test_one_line_paragraphs_are_cut_at_line_starts() -> None:
    # Plain-text exports put each paragraph on one line with no blank line between them:
    # markdown sees one paragraph, but the cuts should still fall between those lines.
    lines = [f"Paragraph {i} starts here. " + LOREM.strip() for i in range(10)]
    text = "\n".join(lines)
    chunks = chunk(text, max_chunk_tokens=100, min_chunk_tokens=0)
    assert len(chunks) > 1
    assert all(c.content_md.startswith("Paragraph ") for c in chunks)
    assert all(c.content_md.endswith("tokens.") for c in chunks)


def test_balanced_split_leaves_no_tiny_tail() -> None:
    text = "## P\n\n" + " ".join(["This is a test sentence."] * 50)
    # Aiming at the limit (the target at the limit: nearest-boundary cuts).
    sizes = [c.token_count for c in chunk(text, max_chunk_tokens=50, target_chunk_tokens=50)]
    assert max(sizes) <= 50 and min(sizes) >= 35
    # The default aims at 2/3 of the limit; pieces stay balanced around it.
    sizes = [c.token_count for c in chunk(text, max_chunk_tokens=50)]
    assert max(sizes) <= 50 and min(sizes) >= 0.75 * max(sizes)
    assert abs(statistics.fmean(sizes) - 50 * 2 / 3) <= 4


def test_single_giant_word_is_split_by_tokens() -> None:
    word = "antidisestablishmentarianism" * 200
    chunks = chunk("## W\n\n" + word, max_chunk_tokens=64)
    assert "".join(c.content_md for c in chunks) == word
    assert all(c.token_count <= 64 for c in chunks)


def test_small_pieces_merge_into_their_neighbours() -> None:
    small = "Short lead."
    big = LOREM * 4  # about 150 tokens: split in two
    text = f"## S\n\n{small}\n\n{big}\n\n{small}\n"
    chunks = chunk(text, max_chunk_tokens=100, min_chunk_tokens=30)
    assert len(chunks) == 2
    assert chunks[0].content_md.startswith(small) and chunks[-1].content_md.endswith(small)
    assert all(c.token_count >= 30 for c in chunks)


def test_link_reference_definitions_are_not_dropped() -> None:
    text = "## R\n\nSee [the spec][s].\n\n[s]: https://spec.commonmark.org\n"
    assert "[s]: https://spec.commonmark.org" in chunk(text)[0].content_md


def test_html_blocks_and_quotes_are_content() -> None:
    text = '## H\n\n<div class="note">\nhello\n</div>\n\n> quoted\n> text\n'
    assert chunk(text)[0].content_md == '<div class="note">\nhello\n</div>\n\n> quoted\n> text'


# Sizes, embedding text, records.


def test_token_counts_are_exact_and_within_limits() -> None:
    text = "## A\n\n" + LOREM * 30 + "\n\n## B\n\n" + LOREM
    chunker = MarkdownChunker(max_chunk_tokens=70)
    for c in chunker.chunk_note(text, "T"):
        assert c.token_count == chunker.tokenizer.count(c.content_md) <= 70


def test_long_breadcrumbs_are_shortened_never_the_content() -> None:
    deep = "".join(
        f"{'#' * (i + 1)} Heading level {i} with a rather long name\n\n" for i in range(6)
    )
    text = deep + LOREM * 3
    chunker = MarkdownChunker(max_chunk_tokens=60, max_input_tokens=64)
    chunks = chunker.chunk_note(text, "A title that is also quite long")
    check_chunks(chunks, text, "A title that is also quite long", chunker)
    for c in chunks:
        assert chunker.tokenizer.count(c.embedding_text) <= 64
        assert c.embedding_text.endswith("\n\n" + c.content_md)
        assert c.embedding_text.startswith("… > ")
    assert "".join(c.content_md for c in chunks).replace(" ", "") == (LOREM * 3).replace(" ", "")


def test_a_shortened_breadcrumb_is_worked_out_once_per_budget_not_per_chunk() -> None:
    """A long title beside the local model's 254-token input limit: every chunk needs the
    shortened breadcrumb, which re-tokenised the title for each chunk (1.12 M characters
    tokenised for this 179 KB note; 0.45 M once shortenings are reused)."""
    tokenized = [0]

    class Counting(HuggingFaceTokenizer):
        def count(self, text: str) -> int:
            tokenized[0] += len(text)
            return super().count(text)

        def count_batch(self, texts: list[str]) -> list[int]:
            tokenized[0] += sum(map(len, texts))
            return super().count_batch(texts)

    tokenizer = Counting(minilm_tokenizer().backend, "minilm")
    chunker = MarkdownChunker(tokenizer=tokenizer, max_input_tokens=254)
    body = "".join(f"Sentence number {i} is here. " for i in range(6000))
    title = " ".join(f"titleword{i}" for i in range(120))
    chunks = chunker.chunk_note(body, title)
    spent = tokenized[0]
    check_chunks(chunks, body, title, chunker)
    assert len(chunks) > 200 and all(
        c.embedding_text.endswith("…\n\n" + c.content_md) for c in chunks
    )
    # Each chunk's content is counted about twice (alone, then with its breadcrumb), and
    # each chunk's breadcrumb once (~3.5x the body with pieces at 2/3 of the limit; the
    # per-chunk re-tokenising of the title cost over 6x).
    assert spent < 4 * len(body)


def test_embedding_text_and_hash() -> None:
    (c,) = chunk("## Sec\n\nbody text\n", title="Note")
    assert c.embedding_text == "Note > Sec\n\nbody text"
    other = chunk("## Sec\n\nbody text\n", title="Other")[0]
    assert other.content_md == c.content_md and other.content_hash != c.content_hash


def test_positions_indexes_and_to_dict() -> None:
    chunks = chunk("## A\na\n## B\nb\n## C\nc\n")
    assert [c.chunk_position for c in chunks] == ["first", "middle", "last"]
    assert [c.chunk_index for c in chunks] == [0, 1, 2]
    assert chunk("just one")[0].chunk_position == "only"
    record = chunks[1].to_dict()
    assert set(record) == {
        "content_md", "heading_path", "chunk_type", "chunk_index", "token_count",
        "start_offset", "end_offset", "section_path", "total_chunks", "chunk_position",
        "content_hash", "embedding_text", "metadata", "section_index", "embedding",
    }  # fmt: skip
    assert json.loads(json.dumps(record)) == record


def test_sibling_sections_of_one_name_get_their_own_section_index() -> None:
    # Same heading path, so only the index tells them apart (search merges by it).
    text = "## Setup\n\none\n\n## Setup\n\ntwo\n\nSetup\n=====\n\nthree\n"
    chunks = chunk(text)
    assert [c.heading_path for c in chunks] == [["Note", "Setup"]] * 3
    assert [c.section_index for c in chunks] == [0, 1, 2]
    split = chunk("## Long\n\n" + "\n\n".join([LOREM] * 12) + "\n\n## Next\n\nend\n")
    assert len(split) > 2  # one section cut into several chunks shares its index
    assert {c.section_index for c in split[:-1]} == {0} and split[-1].section_index == 1


def test_output_is_deterministic() -> None:
    text = "## A\n\n" + LOREM * 20 + "\n\n```py\nx = 1\n```\n"
    first = [c.to_dict() for c in MarkdownChunker(max_chunk_tokens=50).chunk_note(text, "T")]
    second = [c.to_dict() for c in MarkdownChunker(max_chunk_tokens=50).chunk_note(text, "T")]
    assert first == second


def test_invalid_parameters_are_rejected() -> None:
    with pytest.raises(ValueError):
        MarkdownChunker(max_chunk_tokens=0)
    with pytest.raises(ValueError):
        MarkdownChunker(min_chunk_tokens=-1)
    with pytest.raises(ValueError):
        MarkdownChunker(max_input_tokens=2)
    with pytest.raises(ValueError):
        get_chunker("semantic")  # type: ignore[arg-type]
