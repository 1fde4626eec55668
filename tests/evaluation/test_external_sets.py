"""The evaluation sets written elsewhere: excerpt gold in the dataset format, the Chroma
corpora as pages, the documentation-pages set, and the relevance fitting helpers."""

from __future__ import annotations

import importlib.util
import itertools
import json
from pathlib import Path

import pytest
import yaml

from api.evaluation import DatasetError, load_dataset, parse_notes, parse_questions
from benchmarks.chroma_retrieval import MAX_PAGE_CHARS, build_dataset, page_bounds
from benchmarks.relevance_fit import choose_threshold, fit_logistic, reliability

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "benchmarks" / "data" / "docs_pages"
NOTE = {"id": "n1", "title": "T", "content_md": "intro text\n## A\nthe answer is 42\n", "tags": []}


def _questions(*gold: dict) -> str:
    return json.dumps({"id": "q1", "question": "what?", "gold": list(gold)}) + "\n"


def test_an_excerpt_gold_is_the_answers_own_characters() -> None:
    notes = parse_notes(json.dumps(NOTE))
    start = NOTE["content_md"].index("42")
    [q] = parse_questions(_questions({"note_id": "n1", "excerpt": [start, start + 2]}), notes)
    assert q.gold[0].span == (start, start + 2)
    assert q.gold[0].headings == ("A",)
    assert q.gold[0].overlaps("n1", 0, start + 1)
    assert not q.gold[0].overlaps("n1", 0, start)


@pytest.mark.parametrize(
    "gold",
    [
        {"note_id": "n1", "excerpt": [5, 500]},
        {"note_id": "n1", "excerpt": [3, 3]},
        {"note_id": "n1", "excerpt": [1, 2], "headings": ["A"]},
        {"note_id": "n1", "excerpt": "1-2"},
    ],
)
def test_bad_excerpts_are_reported(gold: dict) -> None:
    with pytest.raises(DatasetError, match="excerpt"):
        parse_questions(_questions(gold), parse_notes(json.dumps(NOTE)))


def test_pages_are_never_cut_inside_an_excerpt() -> None:
    text = ("word " * 50 + "\n") * 200
    excerpts = [(1490, 1700), (5000, 5400)]
    bounds = page_bounds(text, excerpts)
    assert bounds[0][0] == 0 and bounds[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    for _, end in bounds[:-1]:
        assert not any(s < end < e for s, e in excerpts)
    assert max(b - a for a, b in bounds) <= MAX_PAGE_CHARS


def test_the_chroma_questions_become_a_split_dataset() -> None:
    dataset, splits, dropped = build_dataset()
    assert len(dataset.questions) + dropped == 472
    assert splits["dev"].isdisjoint(splits["test"])
    assert len(splits["dev"]) > 150 and len(splits["test"]) > 150
    assert all(g.note_id in dataset.notes for q in dataset.questions for g in q.gold)


def test_the_docs_pages_set_is_built_and_split_by_page() -> None:
    spec = importlib.util.spec_from_file_location("docs_build", DOCS / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, text in module.build().items():
        assert (DOCS / name).read_text(encoding="utf-8") == text, f"{name} is stale"
    pages = {}
    for split in ("dev", "test"):
        ds = load_dataset(DOCS / "notes.jsonl", DOCS / f"questions_{split}.jsonl")
        pages[split] = {g.note_id for q in ds.questions for g in q.gold}
    assert pages["dev"].isdisjoint(pages["test"])
    manifest = yaml.safe_load((DOCS / "src" / "manifest.yaml").read_text(encoding="utf-8"))
    assert len(manifest) == 45 and all(e["licence"] for e in manifest)


def test_logistic_fit_reliability_and_threshold() -> None:
    rows = [{"x": x / 100} for x in range(100)]
    labels = [int(x >= 50) for x in range(100)]
    model = fit_logistic(rows, labels, ["x"], name="t", l2=0.01)
    assert model.weights["x"] > 5
    assert model.probability({"x": 0.9}) > 0.9 > 0.1 > model.probability({"x": 0.1})
    rel = reliability([model.probability(r) for r in rows], labels)
    assert rel.sections == 100 and rel.ece < 0.1 and sum(b[2] for b in rel.bins) == 100
    best, tried = choose_threshold([[(0.9, True)], [(0.6, False), (0.5, True)]], [[0.3], [0.1]])
    assert best.answered == 1.0 and best.abstained == 1.0 and 0.3 < best.threshold <= 0.6
    assert len(tried) > 10
