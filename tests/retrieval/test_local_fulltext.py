"""FTS5 keyword search: query sanitisation, stemming, headings, incremental updates."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.retrieval.local_fulltext import (
    MAX_QUERY_TERMS,
    FullTextIndex,
    build_match_expression,
    query_terms,
)
from api.retrieval.models import ChunkData


def data(note_id: str, index: int, content: str, heading: str = "Note > Section") -> ChunkData:
    return ChunkData(
        chunk_id=f"{note_id}:{index}",
        note_id=note_id,
        author_id="alice",
        note_version=1,
        chunk_index=index,
        heading_path=heading.split(" > "),
        section_path=heading,
        content_md=content,
        start_offset=0,
        end_offset=len(content),
    )


@pytest.fixture
def fts() -> FullTextIndex:
    index = FullTextIndex()
    index.replace_note(0, [data("n0", 0, "Running the database server with three replicas")])
    index.replace_note(1, [data("n1", 0, "Pasta recipe: boil water, add salt", "Cooking > Pasta")])
    index.replace_note(
        2,
        [
            data("n2", 0, "How to rotate the TLS certificates", "Runbook > Certificates"),
            data("n2", 1, "The word near appears here, and so does content", "Runbook > Misc"),
        ],
    )
    return index


def ids(results: list[tuple[ChunkData, float]]) -> list[str]:
    return [c.chunk_id for c, _ in results]


def test_query_terms_drop_stopwords_duplicates_and_syntax() -> None:
    assert query_terms('How do I "rotate" the TLS certs? tls*') == ["rotate", "tls", "certs"]
    assert query_terms("the of and is") == []
    assert query_terms("") == []
    assert query_terms("  *** ::: ^^^ (( )) -- ") == []
    many = " ".join(f"word{i}" for i in range(100))
    assert len(query_terms(many)) == MAX_QUERY_TERMS


def test_match_expression_quotes_every_term() -> None:
    assert build_match_expression('NEAR(a b) content:secret OR "x') == (
        '"near" OR "b" OR "content" OR "secret" OR "x"'
    )
    assert build_match_expression("the") is None


def test_stemming_and_ranking(fts: FullTextIndex) -> None:
    results = fts.search("runs databases", 10)
    assert ids(results) == ["n0:0"]
    assert results[0][1] > 0  # higher is better


def test_headings_are_searchable(fts: FullTextIndex) -> None:
    assert ids(fts.search("cooking", 10)) == ["n1:0"]
    assert ids(fts.search("certificates runbook", 10))[0] == "n2:0"


@pytest.mark.parametrize(
    "query",
    [
        'NEAR("near" "content", 2)',
        "near*",
        "content: near",
        "Misc:near",
        '"unbalanced near',
        "(near",
        "^near",
        "near AND NOT nothing",
        "{content} : near",
        "near -content +x",
    ],
)
def test_fts_operators_are_plain_words(fts: FullTextIndex, query: str) -> None:
    # Every variant still finds the chunk containing the word "near", without raising.
    assert "n2:1" in ids(fts.search(query, 10))


@pytest.mark.parametrize("query", ["", "   ", "the and of", "* : ^ ( ) \" ' -", "AND OR NOT"])
def test_queries_without_terms_return_nothing(fts: FullTextIndex, query: str) -> None:
    assert fts.search(query, 10) == []


def test_unicode_text() -> None:
    index = FullTextIndex()
    index.replace_note(0, [data("u", 0, "नमस्ते दुनिया — 日本語テキスト — Café crème")])
    for query in ["नमस्ते", "日本語テキスト", "cafe", "CRÈME"]:
        assert ids(index.search(query, 5)) == ["u:0"], query


def test_allowed_notes_filter_applies_before_limit() -> None:
    index = FullTextIndex()
    # Note 0 has many chunks that match "alpha" strongly; note 1 has one weak match.
    index.replace_note(0, [data("n0", i, "alpha alpha alpha") for i in range(50)])
    index.replace_note(1, [data("n1", 0, "alpha and a lot of other words around it here")])
    assert ids(index.search("alpha", 1, allowed_notes=[1])) == ["n1:0"]
    assert index.search("alpha", 5, allowed_notes=[]) == []
    assert len(index.search("alpha", 5, allowed_notes=[0])) == 5


def test_replace_and_remove_are_incremental() -> None:
    index = FullTextIndex()
    index.replace_note(7, [data("n", 0, "old words here"), data("n", 1, "more old")])
    index.replace_note(7, [data("n", 0, "fresh content")])
    assert index.search("old", 10) == []
    assert ids(index.search("fresh", 10)) == ["n:0"]
    assert len(index) == 1
    index.integrity_check()
    index.remove_note(7)
    assert index.search("fresh", 10) == [] and len(index) == 0
    index.integrity_check()


def test_many_replacements_keep_the_index_consistent() -> None:
    index = FullTextIndex()
    for version in range(30):
        chunks = [data("n", i, f"version{version} shared text {i}") for i in range(version % 5 + 1)]
        index.replace_note(3, chunks)
    index.integrity_check()
    assert index.search("version0", 10) == []
    assert len(index.search("version29", 10)) == 29 % 5 + 1
    assert index.memory_bytes() > 0


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_queries_never_raise(query: str) -> None:
    index = _FUZZ_INDEX
    results = index.search(query, 5)
    assert all(score > 0 for _, score in results)


_FUZZ_INDEX = FullTextIndex()
_FUZZ_INDEX.replace_note(0, [data("f", 0, "A small text about near and far things, * and ^")])


def test_column_weights_change_ranking() -> None:
    chunks = [
        data("h", 0, "nothing relevant in this body text at all", "Guide > Backups"),
        data("c", 0, "backups backups are configured nightly here", "Guide > Misc"),
    ]
    heading_first = FullTextIndex(heading_weight=20.0, content_weight=1.0)
    content_first = FullTextIndex(heading_weight=0.1, content_weight=1.0)
    for index in (heading_first, content_first):
        index.replace_notes([(0, chunks[:1]), (1, chunks[1:])])
    assert ids(heading_first.search("backups", 2))[0] == "h:0"
    assert ids(content_first.search("backups", 2))[0] == "c:0"
