"""Notes with pasted images (`data:` URIs): what indexing them costs, payloads masked or not.

The chunker replaces each long base64 payload by one placeholder character before chunking
and puts the payload back into the chunks afterwards (`api.chunking.data_uri`).
The baseline, measured in the same run on the same notes, is the same chunker without that
step (its `_chunk`). For each note and each
tokenizer (cl100k_base for OpenAI; the local model's MiniLM word pieces, the default):
chunks, tokens embedded (the sum of `token_count`, what OpenAI bills), chunking time, and
for MiniLM the time the local ONNX model takes to embed every chunk's `embedding_text`
(what the indexer's worker spends). Ratios are masked ÷ baseline (< 1: cheaper).

Reproduce: `.venv/bin/python -m benchmarks.pasted_images` (`--no-write` to only print).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import random
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from benchmarks.common import (
    Claim,
    code_revision,
    machine_note,
    markdown_table,
    set_offline_env,
    update_claims,
    update_section,
)
from benchmarks.sample_note import realistic_note

COMMAND = "python -m benchmarks.pasted_images"


def _image(n_bytes: int, seed: int) -> str:
    return base64.b64encode(random.Random(seed).randbytes(n_bytes)).decode()


def _screenshot_note() -> str:
    return (
        "# Trip to Kyoto\n\nThe route we took through the old town:\n\n"
        f"![route map](data:image/png;base64,{_image(225_000, 1)})\n\n"
        "Then we walked to the museum by the river and had ramen at the station.\n"
    )


def _illustrated_note() -> str:
    """A 200-line note with five 40 KB images pasted between its sections."""
    sections = realistic_note(200).split("\n## ")
    for i in range(1, min(6, len(sections))):
        image = f"\n\n![figure {i}](data:image/jpeg;base64,{_image(30_000, 10 + i)})\n"
        sections[i] = sections[i] + image
    return "\n## ".join(sections)


def _html_note() -> str:
    """An HTML-ish paste: `<img src="data:...">` tags inside a table and a list."""
    cell = f'<img alt="logo" src="data:image/png;base64,{_image(6_000, 30)}">'
    rows = "".join(f"| vendor {i} | {cell} | {i * 10} EUR |\n" for i in range(12))
    items = "".join(f"- receipt {i}: {cell}\n" for i in range(8))
    return f"# Invoices\n\n| vendor | logo | total |\n|---|---|---|\n{rows}\n## Receipts\n\n{items}"


TOKENIZERS = ("cl100k", "minilm")
PLAIN = "no images (1000-line note)"
NOTES: dict[str, Callable[[], str]] = {
    "one 300 KB screenshot": _screenshot_note,
    "200-line note, five 40 KB figures": _illustrated_note,
    "table and list of 8 KB `<img>` tags": _html_note,
    PLAIN: lambda: realistic_note(1000),
}


def _chunkers(tokenizers: tuple[str, ...]) -> dict[str, Any]:
    """The app's chunker for each embedder (`api.providers.build_chunker`, default
    settings), with the local model for the MiniLM one."""
    from api.config import Settings
    from api.providers import build_chunker
    from api.tokenizer import tiktoken_tokenizer
    from connectors.embeddings import openai
    from connectors.embeddings.local import LocalEmbedder

    settings = Settings()
    # OpenAI's sizing without a client (no key, no request): its tokenizer and input limit.
    cl100k = SimpleNamespace(
        tokenizer=tiktoken_tokenizer("cl100k_base"), max_input_tokens=openai.MAX_INPUT_TOKENS
    )
    out: dict[str, Any] = {}
    if "cl100k" in tokenizers:
        out["cl100k"] = (build_chunker(settings, cl100k), None)  # type: ignore[arg-type]
    if "minilm" in tokenizers:
        local = LocalEmbedder()
        out["minilm"] = (build_chunker(settings, local), local)
    return out


def _timed(fn: Callable[[], Any], rounds: int) -> tuple[Any, float]:
    times, out = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, sorted(times)[len(times) // 2]


def measure(
    rounds: int, notes: list[str] | None = None, tokenizers: tuple[str, ...] = TOKENIZERS
) -> list[list[Any]]:
    """One row per (note, tokenizer): baseline and masked numbers and their ratios."""
    rows = []
    for tok_name, (chunker, embedder) in _chunkers(tokenizers).items():
        for name in notes or list(NOTES):
            text = NOTES[name]()

            def baseline(text: str = text, chunker: Any = chunker) -> list[Any]:
                return chunker._chunk(text, "Note")  # the same chunker, no masking step

            def masked(text: str = text, chunker: Any = chunker) -> list[Any]:
                return chunker.chunk_note(text, "Note")

            result: dict[str, tuple[list[Any], float, float | None]] = {}
            for label, fn in (("baseline", baseline), ("masked", masked)):
                chunks, seconds = _timed(fn, rounds)
                embed_s = None
                if embedder is not None:
                    texts = [c.embedding_text for c in chunks]
                    start = time.perf_counter()
                    asyncio.run(embedder.embed(texts))
                    embed_s = time.perf_counter() - start
                result[label] = (chunks, seconds, embed_s)
            (b_chunks, b_s, b_emb), (m_chunks, m_s, m_emb) = result["baseline"], result["masked"]
            b_tok = sum(c.token_count for c in b_chunks)
            m_tok = sum(c.token_count for c in m_chunks)
            same = [c.content_md for c in b_chunks] == [c.content_md for c in m_chunks]
            rows.append(
                [
                    name,
                    tok_name,
                    f"{len(text) / 1000:.0f}",
                    len(b_chunks),
                    len(m_chunks),
                    b_tok,
                    m_tok,
                    f"{m_tok / b_tok:.4f}",
                    f"{1000 * b_s:.1f}",
                    f"{1000 * m_s:.1f}",
                    f"{m_s / b_s:.3f}",
                    "—" if b_emb is None else f"{b_emb:.2f}",
                    "—" if m_emb is None else f"{m_emb:.2f}",
                    "—" if b_emb is None or m_emb is None else f"{m_emb / b_emb:.4f}",
                    "yes" if same else "no",
                ]
            )
            print(rows[-1], flush=True)
    return rows


HEADERS = [
    "note",
    "tokenizer",
    "KB",
    "chunks: baseline",
    "chunks: masked",
    "tokens embedded: baseline",
    "tokens embedded: masked",
    "tokens ÷ baseline",
    "chunking ms: baseline",
    "chunking ms: masked",
    "chunking ÷ baseline",
    "local model s: baseline",
    "local model s: masked",
    "embedding ÷ baseline",
    "same chunks",
]


def render(rows: list[list[Any]], revision: str) -> str:
    """The `pasted_images` section."""
    return "\n".join(
        [
            "## Pasted images: data: URI payloads kept, not embedded",
            "",
            f"Reproduce: `{COMMAND}`.",
            "",
            f"{machine_note()} Chunker at {revision}. *Baseline* = the same chunker without "
            "the masking step (`_chunk`); *masked* = `chunk_note`. "
            "cl100k at 300 tokens (OpenAI), MiniLM at 200 word pieces (the local model, the "
            "default); chunking time is the median of the rounds; *local model s* embeds "
            "every chunk's `embedding_text` once with the packaged int8 MiniLM. *Same "
            "chunks*: identical `content_md` lists (expected only without images).",
            "",
            markdown_table(HEADERS, rows),
        ]
    )


def claims(rows: list[list[Any]]) -> list[Claim]:
    """The claims-table row: tokens (and local-model time) embedded for notes with images,
    masked ÷ baseline, and whether a note without images keeps its chunks."""

    def span(values: list[float]) -> str:
        return f"{min(values):.4f}–{max(values):.4f}×"

    images = [r for r in rows if r[0] != PLAIN]
    parts = [
        f"{span([float(r[7]) for r in images if r[1] == tok])} ({tok})"
        for tok in dict.fromkeys(r[1] for r in images)
    ]
    model = [float(r[13]) for r in images if r[13] != "—"]
    plain = [r for r in rows if r[0] == PLAIN]
    same = all(r[-1] == "yes" for r in plain)
    result = "notes with images: tokens embedded " + ", ".join(parts)
    if model:
        result += f", local-model time {span(model)}"
    result += " the unmasked chunker's"
    if plain:
        result += f"; a note without images: {'same' if same else 'different'} chunks"
    passed = same and all(float(r[7]) < 1 for r in images)
    return [Claim("pasted_images", result, passed)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    set_offline_env()
    rows = measure(args.rounds)
    report = render(rows, code_revision("api/chunking", "api/tokenizer"))
    print(report)
    if not args.no_write:
        update_section("pasted_images", report)
        update_claims(claims(rows), COMMAND)


if __name__ == "__main__":
    main()
