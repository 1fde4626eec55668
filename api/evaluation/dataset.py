"""Loader and validator for labelled retrieval datasets (notes + questions, JSONL).

Format: benchmarks/data/retrieval/README.md. A gold entry names a leaf section by `headings`
and/or `span`; every problem is reported with its file and line, all at once. Parsing is
pure; only `load_dataset` reads files.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from api.evaluation.sections import Section, all_sections, normalize_heading

QuestionType = Literal["paraphrase", "fact", "procedure", "table_code"]
QUESTION_TYPES: tuple[str, ...] = get_args(QuestionType)

_NOTE_KEYS = frozenset({"id", "title", "content_md", "tags", "meta"})
_QUESTION_KEYS = frozenset({"id", "question", "gold", "type", "answer", "meta"})
_GOLD_KEYS = frozenset({"note_id", "headings", "span", "excerpt"})


@dataclass(frozen=True, slots=True)
class DatasetIssue:
    """One problem found in a dataset file."""

    source: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.message}"


class DatasetError(ValueError):
    """The dataset is invalid; `issues` lists every problem with its file and line."""

    def __init__(self, issues: list[DatasetIssue]) -> None:
        self.issues = issues
        shown = "\n".join(str(issue) for issue in issues[:25])
        more = f"\n... and {len(issues) - 25} more" if len(issues) > 25 else ""
        super().__init__(f"{len(issues)} dataset problem(s):\n{shown}{more}")


@dataclass(frozen=True, slots=True)
class Note:
    """A markdown note of the corpus, with its citable leaf sections."""

    id: str
    title: str
    content_md: str
    tags: tuple[str, ...]
    sections: tuple[Section, ...] = field(repr=False)  # non-empty leaf sections only

    def text(self, span: tuple[int, int]) -> str:
        """The note text at `span`."""
        return self.content_md[span[0] : span[1]]

    def section_at(self, offset: int) -> Section | None:
        """The leaf section whose body contains character `offset`, if any (None for
        heading lines, blank gaps and front matter)."""
        for section in self.sections:
            if section.span[0] <= offset < section.span[1]:
                return section
        return None

    def sections_in(self, start: int, end: int) -> list[Section]:
        """Leaf sections whose body overlaps `[start, end)`: what a retrieved chunk cites."""
        return [s for s in self.sections if max(start, s.span[0]) < min(end, s.span[1])]


@dataclass(frozen=True, slots=True)
class Gold:
    """Where the answer to a question is: a leaf section's own body, or (an `excerpt`
    gold) the answer's own characters, inside the section at `headings`."""

    note_id: str
    headings: tuple[str, ...]
    span: tuple[int, int]

    def overlaps(self, note_id: str, start: int, end: int) -> bool:
        """Whether a retrieved chunk `[start, end)` of `note_id` hits this gold section."""
        return note_id == self.note_id and max(start, self.span[0]) < min(end, self.span[1])


@dataclass(frozen=True, slots=True)
class Question:
    """A labelled question and its gold section(s)."""

    id: str
    question: str
    gold: tuple[Gold, ...]
    type: QuestionType | None = None
    answer: str | None = None


@dataclass(frozen=True, slots=True)
class Dataset:
    """Notes (the retrieval corpus) and the questions asked of them."""

    notes: Mapping[str, Note]
    questions: tuple[Question, ...]

    def gold_text(self, gold: Gold) -> str:
        """The text of a gold section."""
        return self.notes[gold.note_id].text(gold.span)


def _json_lines(text: str, source: str, issues: list[DatasetIssue]) -> list[tuple[int, Any]]:
    rows: list[tuple[int, Any]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            issues.append(DatasetIssue(source, number, f"invalid JSON: {exc.msg}"))
            continue
        if not isinstance(value, dict):
            issues.append(DatasetIssue(source, number, "expected a JSON object"))
            continue
        rows.append((number, value))
    return rows


def _check_keys(
    row: dict[str, Any], allowed: frozenset[str], what: str, at: DatasetIssue
) -> list[DatasetIssue]:
    unknown = sorted(set(row) - allowed)
    if not unknown:
        return []
    return [DatasetIssue(at.source, at.line, f"unknown {what} key(s) {unknown}")]


def _nonempty_str(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _note_from_row(row: dict[str, Any], at: DatasetIssue) -> tuple[Note | None, list[DatasetIssue]]:
    problems = _check_keys(row, _NOTE_KEYS, "note", at)
    for key in ("id", "title"):
        if not _nonempty_str(row.get(key)):
            problems.append(
                DatasetIssue(at.source, at.line, f"note `{key}` must be a non-empty string")
            )
    if not isinstance(row.get("content_md"), str):
        problems.append(DatasetIssue(at.source, at.line, "note `content_md` must be a string"))
    tags = row.get("tags")
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        problems.append(DatasetIssue(at.source, at.line, "note `tags` must be a list of strings"))
    if problems:
        return None, problems
    sections = tuple(s for s in all_sections(row["content_md"], row["title"]) if not s.is_empty)
    note = Note(row["id"], row["title"], row["content_md"], tuple(tags), sections)
    return note, []


def parse_notes(text: str, source: str = "notes.jsonl") -> dict[str, Note]:
    """Parse notes JSONL text into {note id: Note}, in file order.

    Raises DatasetError listing every malformed line, missing field and duplicate id.
    """
    issues: list[DatasetIssue] = []
    notes: dict[str, Note] = {}
    first_seen: dict[str, int] = {}
    for number, row in _json_lines(text, source, issues):
        at = DatasetIssue(source, number, "")
        note, problems = _note_from_row(row, at)
        issues.extend(problems)
        if note is None:
            continue
        if note.id in first_seen:
            issues.append(
                DatasetIssue(
                    source,
                    number,
                    f"duplicate note id {note.id!r} (first on line {first_seen[note.id]})",
                )
            )
            continue
        first_seen[note.id] = number
        notes[note.id] = note
    if issues:
        raise DatasetError(sorted(issues, key=lambda i: i.line))
    return notes


def _resolve_gold(entry: Any, notes: Mapping[str, Note]) -> tuple[Gold | None, str | None]:
    """Gold for one entry, or an error message."""
    if not isinstance(entry, dict):
        return None, "gold entry must be an object"
    unknown = sorted(set(entry) - _GOLD_KEYS)
    if unknown:
        return None, f"unknown gold key(s) {unknown}"
    note_id = entry.get("note_id")
    note = notes.get(note_id) if isinstance(note_id, str) else None
    if note is None:
        return None, f"gold note_id {entry.get('note_id')!r} is not in the notes file"
    if "excerpt" in entry:
        return _gold_by_excerpt(note, entry)
    headings, span = entry.get("headings"), entry.get("span")
    error = _gold_shape_error(headings, span, note)
    if error is not None:
        return None, error
    if headings is None:
        return _gold_by_span(note, span)
    return _gold_by_headings(note, tuple(normalize_heading(h) for h in headings), span)


def _gold_shape_error(headings: Any, span: Any, note: Note) -> str | None:
    """What is wrong with a gold entry's `headings` and `span` as written, if anything."""
    if headings is None and span is None:
        return "gold entry needs `headings` or `span`"
    if headings is not None and (
        not isinstance(headings, list) or not all(isinstance(h, str) for h in headings)
    ):
        return "gold `headings` must be a list of strings"
    if span is None:
        return None
    if (
        not isinstance(span, list)
        or len(span) != 2
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in span)
    ):
        return "gold `span` must be [start, end] integers"
    if not 0 <= span[0] < span[1] <= len(note.content_md):
        return (
            f"gold span {span} is outside note {note.id!r} "
            f"(content_md has {len(note.content_md)} characters) or empty"
        )
    return None


def _gold_by_excerpt(note: Note, entry: dict[str, Any]) -> tuple[Gold | None, str | None]:
    """An excerpt gold: `[start, end)` characters of the note that hold the answer (a hit
    overlaps them); alone, without `headings` or `span`."""
    excerpt = entry["excerpt"]
    if "headings" in entry or "span" in entry:
        return None, "gold `excerpt` goes alone, without `headings` or `span`"
    if (
        not isinstance(excerpt, list)
        or len(excerpt) != 2
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in excerpt)
        or not 0 <= excerpt[0] < excerpt[1] <= len(note.content_md)
    ):
        return None, f"gold `excerpt` must be [start, end] inside note {note.id!r}, not empty"
    section = note.section_at(excerpt[0])
    return Gold(note.id, section.headings if section else (), (excerpt[0], excerpt[1])), None


def _gold_by_span(note: Note, span: list[int]) -> tuple[Gold | None, str | None]:
    """The section whose own body is exactly `span`."""
    by_span = [s for s in note.sections if list(s.span) == span]
    if not by_span:
        return None, f"gold span {span} is not the own body of any section of {note.id!r}"
    return Gold(note.id, by_span[0].headings, by_span[0].span), None


def _gold_by_headings(
    note: Note, wanted: tuple[str, ...], span: list[int] | None
) -> tuple[Gold | None, str | None]:
    """The one non-empty section at breadcrumb `wanted` (the one at `span` when given)."""
    matches = [s for s in all_sections(note.content_md, note.title) if s.headings == wanted]
    if not matches:
        paths = [" > ".join(s.headings) for s in note.sections]
        close = difflib.get_close_matches(" > ".join(wanted), paths, n=3, cutoff=0.4)
        hint = f"; closest: {close}" if close else f"; it has {len(paths)} sections"
        return None, f"headings {list(wanted)} not found in note {note.id!r}{hint}"
    filled = [s for s in matches if not s.is_empty]
    if not filled:
        return None, f"section {list(wanted)} of {note.id!r} has no body of its own"
    if span is None:
        if len(filled) > 1:
            lines = [s.line for s in filled]
            return None, (
                f"headings {list(wanted)} match {len(filled)} sections of {note.id!r} "
                f"(lines {lines}); give `span` to say which"
            )
        return Gold(note.id, wanted, filled[0].span), None
    for section in filled:
        if list(section.span) == span:
            return Gold(note.id, wanted, section.span), None
    expected = [list(s.span) for s in filled]
    return None, f"gold span {span} does not match section {list(wanted)}: expected {expected}"


def _question_from_row(
    row: dict[str, Any], notes: Mapping[str, Note], at: DatasetIssue
) -> tuple[Question | None, list[DatasetIssue]]:
    def issue(message: str) -> DatasetIssue:
        return DatasetIssue(at.source, at.line, message)

    problems = _check_keys(row, _QUESTION_KEYS, "question", at)
    if not _nonempty_str(row.get("id")):
        problems.append(issue("question `id` must be a non-empty string"))
    if not _nonempty_str(row.get("question")):
        problems.append(issue("`question` must be a non-empty string"))
    qtype = row.get("type")
    if qtype is not None and qtype not in QUESTION_TYPES:
        problems.append(issue(f"`type` must be one of {list(QUESTION_TYPES)}, got {qtype!r}"))
    answer = row.get("answer")
    if answer is not None and not isinstance(answer, str):
        problems.append(issue("`answer` must be a string"))
    entries = row.get("gold")
    golds: list[Gold] = []
    if not isinstance(entries, list) or not entries:
        problems.append(issue("`gold` must be a non-empty list"))
        entries = []
    for position, entry in enumerate(entries):
        gold, error = _resolve_gold(entry, notes)
        if error is not None:
            problems.append(issue(f"gold[{position}]: {error}"))
        elif gold is not None and any(
            g.note_id == gold.note_id and g.span == gold.span for g in golds
        ):
            problems.append(issue(f"gold[{position}]: duplicates an earlier gold entry"))
        elif gold is not None:
            golds.append(gold)
    if problems:
        return None, problems
    return Question(row["id"], row["question"], tuple(golds), qtype, answer), []


def parse_questions(
    text: str, notes: Mapping[str, Note], source: str = "questions.jsonl"
) -> list[Question]:
    """Parse questions JSONL text against `notes`, resolving and checking every gold.

    Raises DatasetError listing every problem (unknown note, headings not found or
    ambiguous, span out of range or not matching its headings, duplicate ids...).
    """
    issues: list[DatasetIssue] = []
    questions: list[Question] = []
    first_seen: dict[str, int] = {}
    for number, row in _json_lines(text, source, issues):
        at = DatasetIssue(source, number, "")
        question, problems = _question_from_row(row, notes, at)
        issues.extend(problems)
        qid = row.get("id")
        if isinstance(qid, str) and qid in first_seen:
            issues.append(
                DatasetIssue(
                    source,
                    number,
                    f"duplicate question id {qid!r} (first on line {first_seen[qid]})",
                )
            )
            continue
        if isinstance(qid, str):
            first_seen[qid] = number
        if question is not None:
            questions.append(question)
    if issues:
        raise DatasetError(sorted(issues, key=lambda i: i.line))
    return questions


def load_dataset(notes_path: str | Path, questions_path: str | Path) -> Dataset:
    """Read and validate a notes file and a questions file (UTF-8 JSONL).

    Raises DatasetError (a ValueError) with file:line for every problem found.
    """
    notes_path, questions_path = Path(notes_path), Path(questions_path)
    notes = parse_notes(notes_path.read_text(encoding="utf-8"), source=str(notes_path))
    questions = parse_questions(
        questions_path.read_text(encoding="utf-8"), notes, source=str(questions_path)
    )
    return Dataset(notes=notes, questions=tuple(questions))
