"""The competitors of the chunking benchmark, built once per token size.

Each `Competitor` has a `run(text)` (what is timed: the library's own public call on the
whole document) and a `views(output)` that turns its result into `ChunkView`s for the
structure checks (offsets only where the library returns them reliably; everything else is
located in the source by `structure_quality`). All peers are configured for the same cl100k
token capacity with zero overlap, and all run offline:

- ours: `api.chunking.MarkdownChunker` with the cl100k tokenizer;
- floor: one pyromark parse (tables + YAML metadata; the events iterated once) + one
  tiktoken `encode_ordinary` over the whole text;
- baseline: the original design's Phase 2.1 regex chunker (`len // 4` estimate);
- langchain: MarkdownHeaderTextSplitter (h1-h6), then
  RecursiveCharacterTextSplitter.from_tiktoken_encoder on each header section;
- llamaindex: MarkdownNodeParser (splits on headings only, has no token size at all);
- chonkie: RecursiveChunker with a tiktoken cl100k Encoding object and its built-in rules
  (the "markdown" recipe is fetched from the Hugging Face hub, so it is unavailable
  offline; a tokenizer *name* would also go to the hub, hence the Encoding object);
- semantic-text-splitter: MarkdownSplitter.from_tiktoken_model (its tiktoken-rs vocabulary
  is compiled in; "text-embedding-3-small" maps to cl100k_base).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyromark

from benchmarks.baseline_regex_chunker import BaselineRegexChunker
from benchmarks.structure_quality import PARSE_OPTIONS, ChunkView

OPENAI_MAX_INPUT_TOKENS = 8191  # text-embedding-3-*: the input limit ours must respect
NOTE_TITLE = "Benchmark note"  # the title ours and the baseline get for every document
_HEADERS = [("#" * n, f"h{n}") for n in range(1, 7)]


@dataclass(frozen=True, slots=True)
class Competitor:
    """One chunker (or the floor) as the benchmark drives it."""

    name: str
    run: Callable[[str], Any]
    views: Callable[[Any], list[ChunkView]] | None  # None: not a chunker (the floor)
    sizes_by_tokens: bool
    note: str = ""


def cl100k_encoding() -> Any:
    """tiktoken's cl100k_base Encoding, loaded from the offline seed."""
    from api.tokenizer.encoders import tiktoken_tokenizer

    return tiktoken_tokenizer("cl100k_base").encoding


def floor_competitor() -> Competitor:
    """One full parse + one full tokenizer pass: what any exact chunker must at least do."""
    enc = cl100k_encoding()

    def run(text: str) -> tuple[int, int]:
        # Events are materialised lazily as Python objects: a consumer pays for iterating
        # them, so the floor does too (iteration only, no per-event work).
        n_events = 0
        for _event in pyromark.events_with_range(text, options=PARSE_OPTIONS):
            n_events += 1
        return n_events, len(enc.encode_ordinary(text))

    return Competitor("floor (parse+encode)", run, None, True)


OURS_NEAREST = "ours, nearest-boundary cuts"


def ours_competitor(
    max_tokens: int, title: str = NOTE_TITLE, *, cohesive_cuts: bool = True
) -> Competitor:
    """Our chunker, sized in cl100k tokens (OpenAI embeddings' tokenizer); with
    `cohesive_cuts=False` (named OURS_NEAREST) cuts go to the nearest boundary instead of
    where the text changes topic: the time the cut rule costs (its retrieval gain is in
    `benchmarks/chunk_quality.py`)."""
    from api.chunking import MarkdownChunker
    from api.tokenizer import tiktoken_tokenizer

    tokenizer = tiktoken_tokenizer("cl100k_base")
    chunker = MarkdownChunker(
        max_chunk_tokens=max_tokens,
        tokenizer=tokenizer,
        max_input_tokens=OPENAI_MAX_INPUT_TOKENS,
        cohesive_cuts=cohesive_cuts,
    )

    def views(chunks: list[Any]) -> list[ChunkView]:
        return [
            ChunkView(c.content_md, c.start_offset, c.end_offset, c.embedding_text, c.token_count)
            for c in chunks
        ]

    # The nearest-cut variant differs only in where a split section is cut: only its time
    # is reported.
    name, shown = (OURS_NEAREST, None) if not cohesive_cuts else ("ours", views)
    return Competitor(name, lambda text: chunker.chunk_note(text, title), shown, True)


def baseline_competitor(max_tokens: int, title: str = NOTE_TITLE) -> Competitor:
    """The original design's regex chunker (its own len//4 estimate stands in for tokens)."""
    chunker = BaselineRegexChunker(max_chunk_tokens=max_tokens)

    def views(chunks: list[Any]) -> list[ChunkView]:
        return [ChunkView(c.content_md, reported_tokens=c.token_count) for c in chunks]

    return Competitor(
        "original regex",
        lambda text: chunker.chunk_note(text, title),
        views,
        True,
        "sizes by len//4",
    )


def langchain_competitor(max_tokens: int) -> Competitor:
    """LangChain's documented markdown recipe: header split, then token-sized recursion."""
    from langchain_text_splitters import (
        MarkdownHeaderTextSplitter,
        RecursiveCharacterTextSplitter,
    )

    headers = MarkdownHeaderTextSplitter(_HEADERS)
    recursive = RecursiveCharacterTextSplitter.from_tiktoken_encoder(
        encoding_name="cl100k_base", chunk_size=max_tokens, chunk_overlap=0
    )

    def run(text: str) -> list[Any]:
        return recursive.split_documents(headers.split_text(text))

    def views(docs: list[Any]) -> list[ChunkView]:
        return [ChunkView(d.page_content) for d in docs]

    return Competitor("langchain md-header+recursive", run, views, True)


def llamaindex_competitor() -> Competitor:
    """LlamaIndex MarkdownNodeParser (heading sections only; no size limit exists)."""
    from llama_index.core import Document
    from llama_index.core.node_parser import MarkdownNodeParser

    parser = MarkdownNodeParser()

    def run(text: str) -> list[Any]:
        return parser.get_nodes_from_documents([Document(text=text)])

    def views(nodes: list[Any]) -> list[ChunkView]:
        return [ChunkView(n.get_content()) for n in nodes]

    return Competitor(
        "llamaindex MarkdownNodeParser", run, views, False, "no token sizing: heading split only"
    )


def chonkie_competitor(max_tokens: int) -> Competitor:
    """chonkie RecursiveChunker, default rules, cl100k via a tiktoken Encoding object."""
    from chonkie import RecursiveChunker

    chunker = RecursiveChunker(tokenizer=cl100k_encoding(), chunk_size=max_tokens)

    def run(text: str) -> list[Any]:
        # chonkie memoises token counts per text (functools.lru_cache, 4096 entries) across
        # calls: re-chunking the same document would time a warm memo, not chunking. Real
        # notes arrive once, so every timed run starts cold.
        chunker._estimate_token_count.cache_clear()
        return chunker.chunk(text)

    def views(chunks: list[Any]) -> list[ChunkView]:
        return [
            ChunkView(c.text, c.start_index, c.end_index, reported_tokens=c.token_count)
            for c in chunks
        ]

    return Competitor(
        "chonkie RecursiveChunker",
        run,
        views,
        True,
        "default rules: markdown recipe needs the HF hub; token-count memo cleared per run",
    )


CHONKIE_EXACT = "chonkie + exact counts"


def chonkie_exact_competitor(max_tokens: int) -> Competitor:
    """chonkie RecursiveChunker with every chunk's token count then made exact (one
    `encode_ordinary` per chunk, on this thread), which is what our chunker reports: chonkie
    adds up its merged pieces' counts instead. Not a speed target: it prices the contract."""
    enc = cl100k_encoding()
    chonkie = chonkie_competitor(max_tokens).run
    encode = enc.encode_ordinary

    def run(text: str) -> list[Any]:
        chunks = chonkie(text)
        for chunk in chunks:
            chunk.token_count = len(encode(chunk.text))
        return chunks

    return Competitor(CHONKIE_EXACT, run, None, True, "chonkie's chunks, each recounted")


def semantic_text_splitter_competitor(max_tokens: int) -> Competitor:
    """semantic-text-splitter MarkdownSplitter at the same cl100k capacity."""
    from semantic_text_splitter import MarkdownSplitter

    splitter = MarkdownSplitter.from_tiktoken_model("text-embedding-3-small", max_tokens)

    def views(indices: list[tuple[int, str]]) -> list[ChunkView]:
        return [ChunkView(text, offset, offset + len(text)) for offset, text in indices]

    return Competitor("semantic-text-splitter", splitter.chunk_indices, views, True)


def all_competitors(max_tokens: int, include_ours: bool = True) -> list[Competitor]:
    """Floor, ours (unless excluded), baseline and every peer at `max_tokens` cl100k tokens."""
    competitors = [floor_competitor()]
    if include_ours:
        competitors.append(ours_competitor(max_tokens))
        competitors.append(ours_competitor(max_tokens, cohesive_cuts=False))
    competitors += [
        baseline_competitor(max_tokens),
        langchain_competitor(max_tokens),
        llamaindex_competitor(),
        chonkie_competitor(max_tokens),
        chonkie_exact_competitor(max_tokens),
        semantic_text_splitter_competitor(max_tokens),
    ]
    return competitors
