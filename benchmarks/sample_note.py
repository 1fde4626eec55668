"""A deterministic, realistic long markdown note for chunking benchmarks.

`realistic_note()` builds a note of exactly `lines` lines the way engineers' notes look:
YAML front matter, nested ATX headings plus a few setext ones, prose paragraphs with inline
code and links, bullet/numbered/nested lists, ``` and ~~~ fences, a GFM table, block quotes
and horizontal rules. Same seed → same text, byte for byte. Every code block and the table
stay well under 200 cl100k tokens, so no structure-preserving chunker has a legitimate reason
to split or oversize them at the benchmarked sizes.
"""

from __future__ import annotations

import random

_WORDS = (
    "index chunk embedding vector query latency cache shard replica schema migration note "
    "token heading section parser offset breadcrumb retrieval citation ranking score filter "
    "cursor lease worker queue retry backoff timeout budget batch stream snapshot version "
    "author tag search hybrid lexical semantic cosine recall precision window overlap model "
    "document collection aggregate pipeline projection field value boundary table fence list "
    "the a of to and in for with on by from that this is are was be can should will must "
    "when then only every each not never always before after because while during across "
    "fast slow large small stable exact rough fresh stale durable atomic idempotent safe"
).split()
_LANGS = (("python", "```"), ("bash", "~~~"), ("json", "```"), ("typescript", "```"))
_CODE = {
    "python": [
        "def chunk(text: str, limit: int = 300) -> list[str]:",
        "    parts = [p for p in text.split('\\n\\n') if p.strip()]",
        "    out: list[str] = []",
        "    for part in parts:",
        "        if out and len(out[-1]) + len(part) < limit * 4:",
        "            out[-1] += '\\n\\n' + part",
        "        else:",
        "            out.append(part)",
        "    return out",
    ],
    "bash": [
        "set -euo pipefail",
        'export MONGODB_URI="mongodb://localhost:27017"',
        "python -m scripts.migrate_notes_to_chunks --batch-size 100",
        "autonote worker --concurrency 2",
    ],
    "json": [
        "{",
        '  "fields": [',
        '    {"type": "vector", "path": "embedding", "numDimensions": 1536},',
        '    {"type": "filter", "path": "author_id"}',
        "  ]",
        "}",
    ],
    "typescript": [
        "export async function search(q: string): Promise<Hit[]> {",
        "  const res = await fetch(`/api/search?q=${encodeURIComponent(q)}`);",
        "  if (!res.ok) throw new Error(`search failed: ${res.status}`);",
        "  return (await res.json()).hits;",
        "}",
    ],
}


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 22))]
    if rng.random() < 0.3:
        words[rng.randrange(len(words))] = f"`{rng.choice(_WORDS)}_{rng.choice(_WORDS)}()`"
    if rng.random() < 0.15:
        i = rng.randrange(len(words))
        words[i] = f"[{words[i]}](https://example.org/{rng.choice(_WORDS)})"
    return " ".join(words).capitalize() + rng.choice(".....?!")


def _paragraph(rng: random.Random) -> list[str]:
    # Notes mix one-line paragraphs with hard-wrapped ones.
    return [
        " ".join(_sentence(rng) for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(1, 4))
    ]


def _bullets(rng: random.Random) -> list[str]:
    numbered = rng.random() < 0.35
    lines: list[str] = []
    for i in range(rng.randint(3, 7)):
        marker = f"{i + 1}." if numbered else "-"
        lines.append(f"{marker} {_sentence(rng)}")
        if rng.random() < 0.3:
            indent = " " * (len(marker) + 1)
            lines.extend(f"{indent}- {_sentence(rng)}" for _ in range(rng.randint(1, 3)))
    return lines


def _code(rng: random.Random) -> list[str]:
    lang, fence = _LANGS[rng.randrange(len(_LANGS))]
    return [f"{fence}{lang}", *_CODE[lang], fence]


def _table(rng: random.Random) -> list[str]:
    lines = ["| setting | default | notes |", "|---|---:|---|"]
    for _ in range(rng.randint(4, 8)):
        name = f"`{rng.choice(_WORDS).upper()}_{rng.choice(_WORDS).upper()}`"
        notes = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 8)))
        lines.append(f"| {name} | {rng.randint(1, 4096)} | {notes} |")
    return lines


def _heading(rng: random.Random, level: int) -> list[str]:
    text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 5))).title()
    if level <= 2 and rng.random() < 0.15:
        return [text, ("=" if level == 1 else "-") * len(text)]
    return ["#" * level + " " + text]


def realistic_note(lines: int = 1000, seed: int = 1000) -> str:
    """A realistic markdown note of exactly `lines` lines (deterministic for a seed)."""
    rng = random.Random(seed)
    out = ["---", "title: Chunking benchmark note", "tags: [bench, markdown]", "---", ""]
    out += ["# Chunking Benchmark Note", "", *_paragraph(rng), ""]
    table_done = False
    while True:
        level = rng.choice((2, 2, 3, 3, 3, 4))
        block = [*_heading(rng, level), ""]
        for _ in range(rng.randint(1, 4)):
            kind = rng.random()
            if kind < 0.45:
                part = _paragraph(rng)
            elif kind < 0.7:
                part = _bullets(rng)
            elif kind < 0.85:
                part = _code(rng)
            elif kind < 0.92:
                part = ["> " + s for s in _paragraph(rng)]
            elif not table_done or kind < 0.95:
                part, table_done = _table(rng), True
            else:
                part = ["---"]
            block += [*part, ""]
        if len(out) + len(block) > lines:
            break
        out += block
    while len(out) < lines:
        out.append(_sentence(rng))
    return "\n".join(out[:lines]) + "\n"
