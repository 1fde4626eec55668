"""The Chroma evaluation corpora and questions as a section-retrieval dataset.

The five corpora (`benchmarks/data/chroma`, MIT, written elsewhere) are plain text with
no headings, so each is cut into pages of about `PAGE_CHARS` characters at line ends (at
sentence ends in lines longer than `MAX_PAGE_CHARS`), never inside a golden excerpt; each
page is a note titled by its corpus (and, in `wikitexts`, by the article it starts in).
The report's golden excerpts become `excerpt` gold entries (a citation hits when it
overlaps one; any one is enough). Pages alternate between dev and test within each corpus;
a question whose excerpts fall in pages of both splits is left out. Built in memory and
validated by the dataset loader; nothing is written.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from api.evaluation.dataset import Dataset, parse_notes, parse_questions
from benchmarks.chroma_eval import Question as ChromaQuestion
from benchmarks.chroma_eval import load_corpora, load_questions, union_ranges
from benchmarks.common import chroma_dir

PAGE_CHARS = 1500
MAX_PAGE_CHARS = 4000
CORPUS_TITLES = {
    "chatlogs": "Support chat logs",
    "finance": "Finance filings",
    "pubmed": "PubMed articles",
    "state_of_the_union": "State of the Union 2024",
    "wikitexts": "WikiText articles",
}
_WIKI_TITLE = re.compile(r"(?m)^ = ([^=].*?) = $")


@dataclass(frozen=True, slots=True)
class Page:
    note_id: str
    corpus: str
    start: int
    end: int
    title: str
    split: str


def _cuts(text: str, pattern: str) -> list[int]:
    return [m.end() for m in re.finditer(pattern, text)]


def _free(pos: int, excerpts: list[tuple[int, int]], starts: list[int]) -> bool:
    """Whether `pos` lies outside every excerpt (merged, sorted)."""
    i = bisect.bisect_right(starts, pos) - 1
    return i < 0 or not excerpts[i][0] < pos < excerpts[i][1]


def _next_cut(cuts: list[int], lo: int, ok: object) -> int | None:
    for pos in cuts[bisect.bisect_left(cuts, lo) :]:
        if ok(pos):  # type: ignore[operator]
            return pos
    return None


def page_bounds(text: str, excerpts: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Consecutive `[start, end)` pages covering `text`, cut outside every excerpt."""
    merged = union_ranges(excerpts)
    starts = [a for a, _ in merged]
    lines, sentences = _cuts(text, r"\n"), _cuts(text, r"[.!?]['\"]?\s")

    def ok(pos: int) -> bool:
        return _free(pos, merged, starts)

    bounds: list[tuple[int, int]] = []
    start = 0
    while len(text) - start > MAX_PAGE_CHARS:
        cut = _next_cut(lines, start + PAGE_CHARS, ok)
        if cut is None or cut - start > MAX_PAGE_CHARS:
            sentence = _next_cut(sentences, start + PAGE_CHARS, ok)
            cut = min(c for c in (cut, sentence) if c is not None) if (cut or sentence) else None
        if cut is None or cut >= len(text):
            break
        bounds.append((start, cut))
        start = cut
    bounds.append((start, len(text)))
    return bounds


def _title(corpus: str, text: str, start: int, part: int) -> str:
    base = CORPUS_TITLES.get(corpus, corpus)
    if corpus == "wikitexts":
        titles = [m for m in _WIKI_TITLE.finditer(text) if m.start() <= start]
        if titles:
            return f"{titles[-1][1]} ({base}, part {part})"
    return f"{base}, part {part}"


def _pages(corpora: dict[str, str], questions: Sequence[ChromaQuestion]) -> list[Page]:
    pages: list[Page] = []
    for corpus, text in corpora.items():
        refs = [r for q in questions if q.corpus_id == corpus for r in q.references]
        for part, (a, b) in enumerate(page_bounds(text, refs), start=1):
            split = "dev" if part % 2 else "test"
            note_id = f"{corpus}-{part:03d}"
            pages.append(Page(note_id, corpus, a, b, _title(corpus, text, a, part), split))
    return pages


def _gold(q: ChromaQuestion, pages: list[Page]) -> list[tuple[Page, tuple[int, int]]]:
    out = []
    for a, b in q.references:
        page = next(p for p in pages if p.corpus == q.corpus_id and p.start <= a < p.end)
        out.append((page, (a - page.start, min(b, page.end) - page.start)))
    return out


def build_dataset() -> tuple[Dataset, dict[str, set[str]], int]:
    """The dataset, its dev/test question ids, and how many questions were left out."""
    root = chroma_dir()
    corpora = load_corpora(root / "corpora")
    chroma_questions = load_questions(root / "questions_df.csv", corpora)
    pages = _pages(corpora, chroma_questions)
    note_rows = [
        {
            "id": p.note_id,
            "title": p.title,
            "content_md": corpora[p.corpus][p.start : p.end],
            "tags": [p.corpus],
        }
        for p in pages
    ]
    rows, split_of, dropped = [], {}, 0
    for number, q in enumerate(chroma_questions, start=1):
        gold = _gold(q, pages)
        splits = {page.split for page, _ in gold}
        if len(splits) != 1:
            dropped += 1
            continue
        qid = f"c{number:04d}"
        split_of[qid] = splits.pop()
        entries = {(page.note_id, span) for page, span in gold}
        rows.append(
            {
                "id": qid,
                "question": q.text,
                "gold": [{"note_id": n, "excerpt": list(s)} for n, s in sorted(entries)],
            }
        )
    notes = parse_notes("\n".join(json.dumps(r) for r in note_rows), source="chroma pages")
    parsed = parse_questions("\n".join(json.dumps(r) for r in rows), notes, "chroma questions")
    splits = {s: {qid for qid, x in split_of.items() if x == s} for s in ("dev", "test")}
    return Dataset(notes=notes, questions=tuple(parsed)), splits, dropped
