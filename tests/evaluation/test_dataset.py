"""The dataset loader/validator, and the shipped retrieval dataset validated with it."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyromark
import pytest

from api.evaluation import (
    QUESTION_TYPES,
    Dataset,
    DatasetError,
    load_dataset,
    parse_notes,
    parse_questions,
    scan_headings,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data" / "retrieval"
EXAMPLE = ROOT / "api" / "evaluation" / "example"

NOTE_MD = (
    "---\ntags: [x]\n---\n# Kitchen\nintro\n## Tap\n### Fix\nswap the cartridge\n## Log\nmarch\n"
)


def _jsonl(*rows: dict[str, Any] | str) -> str:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n"


def _note(**extra: Any) -> dict[str, Any]:
    return {"id": "n1", "title": "Kitchen", "content_md": NOTE_MD, "tags": ["home"], **extra}


def _question(gold: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"id": "q1", "question": "how do I fix the tap?", "gold": gold, **extra}


def _issues(excinfo: pytest.ExceptionInfo[DatasetError]) -> list[tuple[int, str]]:
    return [(i.line, i.message) for i in excinfo.value.issues]


# --- loader --------------------------------------------------------------------------


def test_span_is_computed_from_headings_and_points_at_the_own_body() -> None:
    notes = parse_notes(_jsonl(_note()))
    (question,) = parse_questions(
        _jsonl(_question([{"note_id": "n1", "headings": ["Tap", "Fix"]}], type="procedure")),
        notes,
    )
    (gold,) = question.gold
    assert gold.headings == ("Tap", "Fix")
    assert NOTE_MD[gold.span[0] : gold.span[1]] == "swap the cartridge"
    assert question.type == "procedure"
    # The H1 equal to the title is the note's intro, with empty breadcrumbs.
    (intro,) = parse_questions(_jsonl(_question([{"note_id": "n1", "headings": []}])), notes)
    assert Dataset(notes, (intro,)).gold_text(intro.gold[0]) == "intro"


def test_given_span_must_match_the_headings_and_span_alone_fills_headings() -> None:
    notes = parse_notes(_jsonl(_note()))
    start = NOTE_MD.index("swap")
    good = [start, start + len("swap the cartridge")]
    (q,) = parse_questions(
        _jsonl(_question([{"note_id": "n1", "headings": ["Tap", "Fix"], "span": good}])), notes
    )
    assert list(q.gold[0].span) == good
    (q,) = parse_questions(_jsonl(_question([{"note_id": "n1", "span": good}])), notes)
    assert q.gold[0].headings == ("Tap", "Fix")
    with pytest.raises(DatasetError) as excinfo:
        parse_questions(
            _jsonl(_question([{"note_id": "n1", "headings": ["Log"], "span": good}])), notes
        )
    ((line, message),) = _issues(excinfo)
    assert line == 1 and "does not match section ['Log']" in message and "expected" in message


def test_every_problem_is_reported_with_its_line_number() -> None:
    notes = parse_notes(_jsonl(_note()))
    text = _jsonl(
        _question([{"note_id": "n1", "headings": ["Tap", "Fixx"]}]),  # 1: typo
        "{not json",  # 2
        "",  # 3: blank lines are fine
        _question([{"note_id": "n9", "headings": []}]) | {"id": "q2"},  # 4: unknown note
        _question([{"note_id": "n1", "headings": ["Tap"]}]) | {"id": "q3"},  # 5: no own body
        _question([]) | {"id": "q4"},  # 6: empty gold
        _question([{"note_id": "n1", "headings": ["Log"]}]),  # 7: duplicate id q1
        _question([{"note_id": "n1", "headings": ["Log"]}], type="vibes") | {"id": "q5"},  # 8
        _question([{"note_id": "n1", "headings": ["Log"], "span": [5, 2]}]) | {"id": "q6"},
        {"id": "q7", "question": "x", "golds": []},  # 10: typo'd key, missing gold
    )
    with pytest.raises(DatasetError) as excinfo:
        parse_questions(text, notes, source="qs.jsonl")
    issues = _issues(excinfo)
    assert [line for line, _ in issues] == [1, 2, 4, 5, 6, 7, 8, 9, 10, 10]
    messages = dict(issues)
    assert "closest: ['Tap > Fix']" in messages[1]
    assert "invalid JSON" in messages[2]
    assert "'n9' is not in the notes file" in messages[4]
    assert "has no body of its own" in messages[5]
    assert "non-empty list" in messages[6]
    assert "duplicate question id 'q1' (first on line 1)" in messages[7]
    assert "`type` must be one of" in messages[8]
    assert "outside note" in messages[9]
    assert str(excinfo.value).startswith("10 dataset problem(s):\nqs.jsonl:1: ")


def test_ambiguous_headings_need_a_span() -> None:
    md = "## Day 1\n### Notes\nrainy\n## Day 2\n### Notes\nsunny\n### Notes\nwindy\n"
    notes = parse_notes(_jsonl(_note(content_md=md)))
    with pytest.raises(DatasetError, match=r"match 2 sections .* \(lines \[5, 7\]\)"):
        parse_questions(
            _jsonl(_question([{"note_id": "n1", "headings": ["Day 2", "Notes"]}])), notes
        )
    start = md.index("windy")
    (q,) = parse_questions(
        _jsonl(
            _question(
                [{"note_id": "n1", "headings": ["Day 2", "Notes"], "span": [start, start + 5]}]
            )
        ),
        notes,
    )
    assert notes["n1"].text(q.gold[0].span) == "windy"


def test_notes_are_validated_too() -> None:
    text = _jsonl(
        _note(),
        _note(),  # duplicate id
        {"id": "n2", "title": "", "content_md": 3, "tags": "x", "extra": 1},
    )
    with pytest.raises(DatasetError) as excinfo:
        parse_notes(text)
    issues = _issues(excinfo)
    assert issues[0] == (2, "duplicate note id 'n1' (first on line 1)")
    assert {line for line, _ in issues[1:]} == {3}
    assert len(issues) == 5  # unknown key, empty title, content_md, tags


def test_load_dataset_reads_utf8_files(tmp_path: Path) -> None:
    (tmp_path / "notes.jsonl").write_text(_jsonl(_note(title="Küche 🐈")), encoding="utf-8")
    (tmp_path / "q.jsonl").write_text(
        _jsonl(_question([{"note_id": "n1", "headings": ["Kitchen", "Log"]}])), encoding="utf-8"
    )
    dataset = load_dataset(tmp_path / "notes.jsonl", tmp_path / "q.jsonl")
    assert dataset.notes["n1"].title == "Küche 🐈"
    assert dataset.gold_text(dataset.questions[0].gold[0]) == "march"
    assert dataset.notes["n1"].section_at(NOTE_MD.index("march") + 2).headings == ("Kitchen", "Log")
    assert dataset.notes["n1"].section_at(NOTE_MD.index("## Log")) is None


def test_chunk_offsets_map_to_sections_and_gold_hits() -> None:
    notes = parse_notes(_jsonl(_note()))
    (q,) = parse_questions(
        _jsonl(_question([{"note_id": "n1", "headings": ["Tap", "Fix"]}])), notes
    )
    gold, note = q.gold[0], notes["n1"]
    # A chunk that starts on the heading line still cites the section whose text it holds.
    heading_start = NOTE_MD.index("### Fix")
    chunk = (heading_start, gold.span[1])
    assert [s.headings for s in note.sections_in(*chunk)] == [("Tap", "Fix")]
    assert gold.overlaps("n1", *chunk)
    assert not gold.overlaps("n2", *chunk)
    assert not gold.overlaps("n1", heading_start, gold.span[0])  # heading line only
    whole = note.sections_in(0, len(NOTE_MD))
    assert [s.headings for s in whole] == [(), ("Tap", "Fix"), ("Log",)]


# --- the shipped dataset -------------------------------------------------------------


@pytest.fixture(scope="module")
def splits() -> dict[str, Dataset]:
    return {
        split: load_dataset(DATA / "notes.jsonl", DATA / f"questions_{split}.jsonl")
        for split in ("dev", "test")
    }


def test_shipped_dataset_is_valid_and_split_by_note(splits: dict[str, Dataset]) -> None:
    notes = splits["dev"].notes
    assert 55 <= len(notes) <= 65
    gold_notes = {s: {g.note_id for q in d.questions for g in q.gold} for s, d in splits.items()}
    assert not gold_notes["dev"] & gold_notes["test"], "a note has gold in both splits"
    assert gold_notes["dev"] | gold_notes["test"] == set(notes), "every note is asked about"
    all_questions = [q for d in splits.values() for q in d.questions]
    assert len({q.id for q in all_questions}) == len(all_questions)
    assert len({q.question.casefold() for q in all_questions}) == len(all_questions)
    assert 280 <= len(all_questions) <= 400
    for dataset in splits.values():
        assert len(dataset.questions) >= 0.4 * len(all_questions)
    for q in all_questions:
        assert q.answer and q.answer.strip()
        assert len({(g.note_id, g.span) for g in q.gold}) == len(q.gold)
        assert all(splits["dev"].gold_text(g).strip() for g in q.gold)


def test_question_type_mix(splits: dict[str, Dataset]) -> None:
    types = Counter(q.type for d in splits.values() for q in d.questions)
    total = sum(types.values())
    assert set(types) == set(QUESTION_TYPES)
    share = {t: n / total for t, n in types.items()}
    assert 0.33 <= share["paraphrase"] <= 0.47
    assert 0.23 <= share["fact"] <= 0.37
    assert 0.14 <= share["procedure"] <= 0.26
    assert 0.07 <= share["table_code"] <= 0.16


def test_notes_have_the_intended_variety(splits: dict[str, Dataset]) -> None:
    notes = list(splits["dev"].notes.values())
    lines = [n.content_md.count("\n") + 1 for n in notes]
    sections = [len(n.sections) for n in notes]
    assert sum(n >= 300 for n in lines) >= 2, "a few long notes"
    assert sum(s <= 2 for s in sections) >= 3, "a few tiny notes"
    assert sum(5 <= s <= 25 for s in sections) >= 0.7 * len(notes), "most have 5-25 sections"
    assert any(n.content_md.startswith("---\n") for n in notes), "front matter"
    assert any("\r\n" in n.content_md for n in notes), "a note with Windows line endings"
    assert any(not scan_headings(n.content_md) for n in notes), "notes without headings"
    levels = Counter(h.level for n in notes for h in scan_headings(n.content_md))
    assert levels[2] > levels[3] > levels[4] > 0, "mostly h2/h3, some h4"
    generic = Counter(h.text for n in notes for h in scan_headings(n.content_md))
    assert all(generic[h] >= 3 for h in ("Overview", "Troubleshooting", "Notes", "Setup"))


def _commonmark_headings(md: str) -> list[tuple[int, int]]:
    """(level, 1-based line) of top-level headings according to pulldown-cmark."""
    options = pyromark.Options.ENABLE_TABLES | pyromark.Options.ENABLE_YAML_STYLE_METADATA_BLOCKS
    raw = md.encode("utf-8")
    found, depth = [], 0
    for event, span in pyromark.events_with_range(md, options=options):
        if isinstance(event, dict) and "Start" in event:
            start = event["Start"]
            if isinstance(start, dict) and "Heading" in start and depth == 0:
                level = int(start["Heading"]["level"].removeprefix("H"))
                found.append((level, raw[: span["start"]].count(b"\n") + 1))
            if start in ("Item", "BlockQuote") or (
                isinstance(start, dict) and "BlockQuote" in start
            ):
                depth += 1
        elif isinstance(event, dict) and "End" in event:
            end = event["End"]
            if end in ("Item", "BlockQuote") or (isinstance(end, dict) and "BlockQuote" in end):
                depth -= 1
    return found


def test_line_scan_agrees_with_a_commonmark_parser_on_every_note(
    splits: dict[str, Dataset],
) -> None:
    for note in splits["dev"].notes.values():
        ours = [(h.level, h.line) for h in scan_headings(note.content_md)]
        assert ours == _commonmark_headings(note.content_md), note.id


def _build_module() -> Any:
    spec = importlib.util.spec_from_file_location("retrieval_build", DATA / "build.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_jsonl_files_are_up_to_date_with_their_sources() -> None:
    outputs = _build_module().build()
    for name, text in outputs.items():
        path = (
            EXAMPLE / name.removeprefix("example/") if name.startswith("example/") else DATA / name
        )
        assert path.read_text(encoding="utf-8") == text, f"{path} is stale: run build.py"


def test_example_set_is_a_small_consistent_subset(splits: dict[str, Dataset]) -> None:
    example = load_dataset(EXAMPLE / "notes.jsonl", EXAMPLE / "questions.jsonl")
    assert 6 <= len(example.notes) <= 10 and 25 <= len(example.questions) <= 40
    assert {g.note_id for q in example.questions for g in q.gold} == set(example.notes)
    dev = {q.id: q for q in splits["dev"].questions}
    for q in example.questions:
        assert dev[q.id] == q
    for note in example.notes.values():
        assert splits["dev"].notes[note.id] == note
    assert len({q.type for q in example.questions}) == len(QUESTION_TYPES)
