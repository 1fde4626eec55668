"""Obsidian markup in what is embedded: wikilinks and embeds as their readable text, front
matter aliases beside the title; `content_md` and the offsets stay the note's own."""

from __future__ import annotations

import pytest

from api.chunking import ALGORITHM_REVISION, MarkdownChunker, get_chunker
from api.chunking.obsidian import front_matter_aliases, link_text, readable_links
from tests.chunking.chunk_invariants import check_chunks, minilm_tokenizer


@pytest.mark.parametrize(
    ("text", "readable"),
    [
        ("See [[Kyoto trip]].", "See Kyoto trip."),
        ("See [[travel/Kyoto trip.md|the trip]].", "See the trip."),
        ("[[travel/Kyoto trip]]", "Kyoto trip"),
        ("[[Kyoto trip#Day 2]]", "Kyoto trip > Day 2"),
        ("[[#Local heading]]", "Local heading"),
        ("[[Kyoto trip#^a1b2c3]]", "Kyoto trip"),
        ("![[maps/route.png]]", "route.png"),
        ("![[route.png|300]] ![[route.png|640x480]]", "route.png route.png"),
        ("![[route.png|The route]]", "The route"),
        ("![[Checklist]]", "Checklist"),
        ("[[Kyoto trip|  ]]", "Kyoto trip"),
        ("[[]] [[|x]]", "[[]] x"),
        ("`[[kept]]` and ``[[kept too]]``", "`[[kept]]` and ``[[kept too]]``"),
        ("```\n[[in a fence]]\n```\n[[Out]]", "```\n[[in a fence]]\n```\nOut"),
        ("~~~py\n[[x]]\n~~~", "~~~py\n[[x]]\n~~~"),
        ("no links at all", "no links at all"),
        ("[[multi\nline]]", "[[multi\nline]]"),
    ],
)
def test_readable_links(text: str, readable: str) -> None:
    assert readable_links(text) == readable


def test_link_text_of_a_link_with_nothing_readable_is_empty() -> None:
    assert link_text("", None, embed=False) == "" and link_text("#^id", None, embed=False) == ""


@pytest.mark.parametrize(
    ("fields", "aliases"),
    [
        ({"aliases": ["Kyoto 2024", "Japan trip", "Kyoto 2024"]}, ["Kyoto 2024", "Japan trip"]),
        ({"aliases": "Kyoto 2024, Japan  trip"}, ["Kyoto 2024", "Japan trip"]),
        ({"alias": "Old name"}, ["Old name"]),
        ({"aliases": [2024, True, None, {"a": 1}, " "]}, ["2024"]),
        ({"aliases": {"a": 1}}, []),
        ({}, []),
        ({"aliases": [f"a{i}" for i in range(50)]}, [f"a{i}" for i in range(20)]),
    ],
)
def test_front_matter_aliases(fields: dict, aliases: list[str]) -> None:
    assert front_matter_aliases(fields) == aliases


NOTE = """---
aliases: [Japan trip, Kyoto 2024]
tags: [travel]
---
## Plan

Day one follows [[itineraries/Kyoto day 1.md|the first itinerary]] and ![[route.png|300]].

```text
[[literal in code]]
```
"""


@pytest.mark.parametrize("tokenizer", ["cl100k", "minilm"])
def test_embedded_text_reads_links_and_aliases_while_content_stays_exact(tokenizer: str) -> None:
    extra = {"tokenizer": minilm_tokenizer()} if tokenizer == "minilm" else {}
    chunker = MarkdownChunker(**extra)  # type: ignore[arg-type]
    chunks = chunker.chunk_note(NOTE, "Kyoto")
    check_chunks(chunks, NOTE, "Kyoto", chunker)
    (only,) = chunks
    assert only.content_md == NOTE[only.start_offset : only.end_offset]
    assert "[[itineraries/Kyoto day 1.md|the first itinerary]]" in only.content_md
    assert only.heading_path == ["Kyoto", "Plan"] and only.section_path == "Kyoto > Plan"
    embedded = (
        "Day one follows the first itinerary and route.png.\n\n```text\n[[literal in code]]\n```"
    )
    assert only.embedding_text == f"Kyoto (Japan trip, Kyoto 2024) > Plan\n\n{embedded}"
    assert only.token_count == chunker.tokenizer.count(embedded)
    assert only.metadata["aliases"] == ["Japan trip", "Kyoto 2024"]


def test_other_strategies_read_links_and_aliases_too() -> None:
    for strategy in ("fixed_tokens", "whole_note"):
        chunker = get_chunker(strategy)  # type: ignore[arg-type]
        chunks = chunker.chunk_note(NOTE, "Kyoto")
        check_chunks(chunks, NOTE, "Kyoto", chunker, expect_structure=False)
        assert chunks[0].embedding_text.startswith("Kyoto (Japan trip, Kyoto 2024)\n\n")
        assert "the first itinerary" in chunks[0].embedding_text


def test_a_note_without_obsidian_markup_chunks_as_before() -> None:
    text = "## A\n\nPlain [link](https://example.com) and [x] brackets.\n"
    (only,) = MarkdownChunker().chunk_note(text, "T")
    assert only.embedding_text == "T > A\n\nPlain [link](https://example.com) and [x] brackets."
    assert only.metadata == {}


def test_the_revision_moves_so_stored_notes_are_chunked_again() -> None:
    assert ALGORITHM_REVISION >= 7
    assert f":r{ALGORITHM_REVISION}:" in MarkdownChunker().version
