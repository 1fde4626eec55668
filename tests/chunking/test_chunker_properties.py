"""Property tests: every invariant on generated markdown, for every strategy and size."""

from __future__ import annotations

import itertools
from functools import cache

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.chunking import MarkdownChunker, get_chunker
from api.chunking.packing import pack
from api.chunking.strategies import Chunker
from tests.chunking.chunk_invariants import check_chunks, minilm_tokenizer
from tests.chunking.md_strategies import markdown_docs, titles

SIZES = (10, 50, 300)
SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@cache
def chunker(strategy: str, size: int, max_input: int | None = None) -> Chunker:
    return get_chunker(
        strategy,
        max_chunk_tokens=size,
        min_chunk_tokens=min(50, size // 2),
        max_input_tokens=max_input,
    )


@SETTINGS
@given(text=markdown_docs(), title=titles, size=st.sampled_from(SIZES))
def test_hierarchical_invariants(text: str, title: str, size: int) -> None:
    c = chunker("hierarchical_markdown", size)
    check_chunks(c.chunk_note(text, title), text, title, c)


@SETTINGS
@given(text=markdown_docs(), title=titles, size=st.sampled_from(SIZES))
def test_fixed_tokens_invariants(text: str, title: str, size: int) -> None:
    c = chunker("fixed_tokens", size)
    check_chunks(c.chunk_note(text, title), text, title, c)


@settings(SETTINGS, max_examples=80)
@given(text=markdown_docs(), title=titles, max_input=st.sampled_from([16, 64, 8191]))
def test_whole_note_invariants(text: str, title: str, max_input: int) -> None:
    c = chunker("whole_note", 300, max_input)
    check_chunks(c.chunk_note(text, title), text, title, c)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=markdown_docs(), title=titles, max_input=st.sampled_from([12, 24, 40]))
def test_tiny_model_input_limits(text: str, title: str, max_input: int) -> None:
    """With a tiny model input every limit (breadcrumb, code, tables) is under pressure."""
    c = chunker("hierarchical_markdown", 300, max_input)
    check_chunks(c.chunk_note(text, title), text, title, c)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=markdown_docs(), title=titles)
def test_deterministic(text: str, title: str) -> None:
    c = chunker("hierarchical_markdown", 50)
    first = [x.to_dict() for x in c.chunk_note(text, title)]
    assert first == [x.to_dict() for x in c.chunk_note(text, title)]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=markdown_docs(), title=titles, size=st.sampled_from([10, 200, 300]))
def test_minilm_wordpiece_tokenizer(text: str, title: str, size: int) -> None:
    """The local model's word-piece tokenizer (254 usable inputs) sizes chunks exactly too."""
    c = minilm_chunker(size)
    assert c.tokenizer is minilm_tokenizer()
    check_chunks(c.chunk_note(text, title), text, title, c)


@cache
def minilm_chunker(size: int) -> Chunker:
    return get_chunker(
        "hierarchical_markdown",
        max_chunk_tokens=size,
        min_chunk_tokens=min(50, size // 2),
        tokenizer=minilm_tokenizer(),
        max_input_tokens=254,
    )


@cache
def target_chunker(size: int, target: int) -> Chunker:
    return MarkdownChunker(size, min(50, size // 2), target_chunk_tokens=target)


@settings(SETTINGS, max_examples=80)
@given(
    text=markdown_docs(),
    title=titles,
    size_target=st.sampled_from([(10, 5), (50, 30), (300, 180), (300, 1)]),
)
def test_target_size_invariants(text: str, title: str, size_target: tuple[int, int]) -> None:
    """A target below the limit changes where sections are cut, never the invariants."""
    c = target_chunker(*size_target)
    check_chunks(c.chunk_note(text, title), text, title, c)


@given(
    sizes=st.lists(st.integers(0, 120), min_size=1, max_size=150),  # both sides of n < 64
    limit=st.integers(1, 150),
    frac=st.floats(0.05, 1.0),
)
def test_pack_with_target(sizes: list[int], limit: int, frac: float) -> None:
    """Groups are consecutive, cover every piece, stay within the limit (a lone oversized
    piece aside) and the target never gives fewer groups than packing to the limit."""
    toks = [0, *itertools.accumulate(sizes)]
    target = max(1, int(frac * limit))
    groups = pack(toks, limit, target)
    assert [g[0] for g in groups] == [0, *(g[1] for g in groups[:-1])]
    assert groups[-1][1] == len(sizes)
    for i, j in groups:
        assert j > i
        assert toks[j] - toks[i] <= limit or j == i + 1
    assert len(groups) >= len(pack(toks, limit))
    assert pack(toks, limit, limit) == pack(toks, limit)


@given(st.text(alphabet="ab \n\r", max_size=40), st.data())
@settings(max_examples=500, deadline=None)
def test_the_checkers_line_bounds_match_their_definition(text: str, data: st.DataObject) -> None:
    """The invariant checker finds line bounds with bounded searches (a whole-note search for
    a "\\r" made it quadratic): they equal the plain definition — the line starts after the
    last "\\n" or "\\r" before `pos` (not before `floor`) and ends at the first one after."""
    from tests.chunking.chunk_invariants import _line_end, _line_start

    floor = data.draw(st.integers(0, len(text)))
    pos = data.draw(st.integers(floor, len(text)))
    breaks = [i for i in range(floor, pos) if text[i] in "\r\n"]
    assert _line_start(text, floor, pos) == (breaks[-1] + 1 if breaks else floor)
    after = [i for i in range(pos, len(text)) if text[i] in "\r\n"]
    assert _line_end(text, pos) == (after[0] if after else -1)
