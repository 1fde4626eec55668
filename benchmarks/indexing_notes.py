"""Structured realistic notes and the edit mix of the indexing benchmark (pure: no I/O).

A `Note` is a title and a list of `Section`s (h2, some h3 subsections) holding paragraphs,
bullet lists and fenced code. Keeping the structure (instead of editing a string) lets every
edit of the mix be exactly what its name says:

- typo fix — the generator plants one misspelled word; the fix restores it;
- paragraph rewrite — one paragraph replaced by new sentences;
- new section — a new h2 section (two paragraphs) inserted before another h2;
- renamed heading — one heading's text changed (its subsections' breadcrumbs change too);
- deleted section — one h2 section removed with its subsections;
- reordered sections — one h2 section (with its subsections) moved elsewhere.

`edit_cost()` is the independent count: given the chunks of the new version and the hashes
already embedded, how many chunks and tokens a correct incremental indexer must embed.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

_WORDS = (
    "deploy rollback replica primary secondary backup restore snapshot retention quota alert "
    "pager runbook incident latency throughput budget queue worker lease retry timeout cache "
    "index shard cluster region failover migration schema field cursor batch stream token "
    "vector search ranking citation chunk heading section offset version author tag review "
    "the a of to and in for with on by from that this is are was be can should will must "
    "when then only every each not never always before after because while during across"
).split()
_TYPO = ("configuration", "configuraiton")
_CODE = (
    [
        "```bash",
        "kubectl rollout status deploy/api --timeout=120s",
        "kubectl logs -l app=worker --since=10m | grep -i lease",
        "```",
    ],
    [
        "```python",
        "def backoff(attempt: int, base: float = 2.0) -> float:",
        "    return min(600.0, base * 2 ** attempt)",
        "```",
    ],
    ["```yaml", "retention:", "  daily: 7", "  weekly: 4", "  monthly: 12", "```"],
)


@dataclass
class Section:
    """A heading and the markdown blocks under it (up to the next heading)."""

    level: int
    title: str
    blocks: list[str] = field(default_factory=list)


@dataclass
class Note:
    """A note kept as structure; `render()` gives its markdown."""

    title: str
    sections: list[Section]

    def render(self) -> str:
        parts = []
        for s in self.sections:
            parts.append("#" * s.level + " " + s.title)
            parts.extend(s.blocks)
        return "\n\n".join(parts) + "\n"


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(9, 20))]
    if rng.random() < 0.25:
        words[rng.randrange(len(words))] = f"`{rng.choice(_WORDS)}_{rng.choice(_WORDS)}`"
    return " ".join(words).capitalize() + "."


def paragraph(rng: random.Random, sentences: tuple[int, int] = (2, 5)) -> str:
    """A paragraph of a few sentences."""
    return " ".join(_sentence(rng) for _ in range(rng.randint(*sentences)))


def _bullets(rng: random.Random) -> str:
    return "\n".join(f"- {_sentence(rng)}" for _ in range(rng.randint(3, 6)))


def _block(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.7:
        return paragraph(rng)
    if kind < 0.85:
        return _bullets(rng)
    return "\n".join(rng.choice(_CODE))


def _heading(rng: random.Random, n: int) -> str:
    return f"{' '.join(rng.choice(_WORDS[:40]) for _ in range(2)).title()} {n}"


def generate_note(n_sections: int = 40, seed: int = 0, blocks: tuple[int, int] = (1, 3)) -> Note:
    """A note of `n_sections` sections (~30 % are h3 under the preceding h2), each with
    `blocks` paragraphs/lists/code blocks, and one planted typo for the typo-fix edit."""
    rng = random.Random(seed)
    sections: list[Section] = []
    for i in range(n_sections):
        level = 3 if i > 0 and rng.random() < 0.3 else 2
        sections.append(
            Section(level, _heading(rng, i), [_block(rng) for _ in range(rng.randint(*blocks))])
        )
    sections[0].blocks.insert(0, paragraph(rng))  # so the first section has prose
    where = _paragraphs(sections)[len(_paragraphs(sections)) // 3]
    s, b = where
    sections[s].blocks[b] = f"{sections[s].blocks[b]} Check the {_TYPO[1]} first."
    return Note(f"Operations handbook {seed}", sections)


def _paragraphs(sections: list[Section]) -> list[tuple[int, int]]:
    return [
        (si, bi)
        for si, s in enumerate(sections)
        for bi, b in enumerate(s.blocks)
        if b[:1].isalpha() and "\n" not in b
    ]


def _h2_blocks(sections: list[Section]) -> list[tuple[int, int]]:
    """[start, end) index ranges of each h2 section with its h3 subsections."""
    starts = [i for i, s in enumerate(sections) if s.level == 2]
    return [(a, b) for a, b in zip(starts, [*starts[1:], len(sections)], strict=True)]


# -- the edit mix: each takes a note and an rng, returns (new note, what changed) ---------


def typo_fix(note: Note, rng: random.Random) -> tuple[Note, str]:
    new = copy.deepcopy(note)
    for s in new.sections:
        for i, b in enumerate(s.blocks):
            if _TYPO[1] in b:
                s.blocks[i] = b.replace(_TYPO[1], _TYPO[0], 1)
                return new, f"'{_TYPO[1]}' → '{_TYPO[0]}' in '{s.title}'"
    raise ValueError("the note has no planted typo left")


def paragraph_rewrite(note: Note, rng: random.Random) -> tuple[Note, str]:
    new = copy.deepcopy(note)
    si, bi = rng.choice(_paragraphs(new.sections))
    new.sections[si].blocks[bi] = paragraph(rng)
    return new, f"a paragraph of '{new.sections[si].title}'"


def new_section(note: Note, rng: random.Random) -> tuple[Note, str]:
    new = copy.deepcopy(note)
    start, _ = rng.choice(_h2_blocks(new.sections)[1:] or _h2_blocks(new.sections))
    section = Section(2, f"New Findings {rng.randrange(1000)}", [paragraph(rng), paragraph(rng)])
    new.sections.insert(start, section)
    return new, f"'{section.title}' (2 paragraphs) before '{new.sections[start + 1].title}'"


def renamed_heading(note: Note, rng: random.Random) -> tuple[Note, str]:
    new = copy.deepcopy(note)
    s = rng.choice(new.sections)
    old = s.title
    s.title = f"{old} (revised)"
    return new, f"h{s.level} '{old}'"


def deleted_section(note: Note, rng: random.Random) -> tuple[Note, str]:
    new = copy.deepcopy(note)
    start, end = rng.choice(_h2_blocks(new.sections))
    title = new.sections[start].title
    del new.sections[start:end]
    return new, f"h2 '{title}' with {end - start - 1} subsection(s)"


def reordered_sections(note: Note, rng: random.Random) -> tuple[Note, str]:
    new = copy.deepcopy(note)
    blocks = _h2_blocks(new.sections)
    if len(blocks) < 3:
        raise ValueError("need at least three h2 sections to reorder")
    (start, end), target = rng.sample(blocks, 2)
    moved = new.sections[start:end]
    del new.sections[start:end]
    at = target[0] if target[0] < start else target[0] - (end - start)
    new.sections[at:at] = moved
    return new, f"h2 '{moved[0].title}' moved before '{new.sections[at + len(moved)].title}'"


EditFn = Callable[[Note, random.Random], tuple[Note, str]]
EDIT_MIX: tuple[tuple[str, EditFn], ...] = (
    ("typo fix", typo_fix),
    ("paragraph rewrite", paragraph_rewrite),
    ("new section", new_section),
    ("renamed heading", renamed_heading),
    ("deleted section", deleted_section),
    ("reordered sections", reordered_sections),
)


@dataclass(frozen=True, slots=True)
class EditCost:
    """What a note version costs to embed: in full, and incrementally."""

    chunks_total: int
    tokens_total: int
    chunks_new: int
    tokens_new: int

    @property
    def chunk_fraction(self) -> float:
        return self.chunks_new / self.chunks_total if self.chunks_total else 0.0

    @property
    def token_fraction(self) -> float:
        return self.tokens_new / self.tokens_total if self.tokens_total else 0.0


def edit_cost(
    chunks: Sequence[Any], seen_hashes: set[str], count: Callable[[list[str]], list[int]]
) -> EditCost:
    """Full cost = every chunk's `embedding_text` (what a re-embed of the note pays);
    incremental = each distinct `content_hash` not embedded before, once."""
    counts = count([c.embedding_text for c in chunks])
    new: dict[str, int] = {}
    for c, n in zip(chunks, counts, strict=True):
        if c.content_hash not in seen_hashes:
            new.setdefault(c.content_hash, n)
    return EditCost(len(chunks), sum(counts), len(new), sum(new.values()))


def _is_prose(block: str) -> bool:
    first = block.lstrip()[:1]
    fenced = "```" in block or "~~~" in block
    setext = any(set(line) <= {"=", "-"} for line in block.splitlines()[1:])
    return first.isalpha() and not fenced and not setext and block.count("\n") < 4


def rewrite_paragraph(content: str, k: int, text: str) -> str:
    """`content` with its k-th prose paragraph (blank-line separated, not a heading, list,
    table, quote or code; counted cyclically) replaced by `text`."""
    blocks = content.split("\n\n")
    prose = [i for i, b in enumerate(blocks) if _is_prose(b)]
    if not prose:
        raise ValueError("no prose paragraph to rewrite")
    blocks[prose[k % len(prose)]] = text
    return "\n\n".join(blocks)
