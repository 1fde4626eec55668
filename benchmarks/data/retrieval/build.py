"""Build the retrieval dataset's JSONL files from the hand-written sources in `src/`.

    python benchmarks/data/retrieval/build.py           # rewrite the JSONL files, print stats
    python benchmarks/data/retrieval/build.py --check   # exit 1 if the JSONL files are stale

Sources: `src/manifest.yaml` (id, title, tags, split of every note), `src/notes/<id>.md`
(the note's content_md, byte for byte) and `src/questions/<id>.yaml` (the questions whose
gold is in that note). A question entry is `{q, t, a, h}` with `h` the gold headings in the
same note (a list, or one "H2 > H3" string), or `{q, t, a, gold: [{note, h}, ...]}` for
answers in several sections. Spans are
computed by `api.evaluation` (never typed by hand) and question ids are assigned in manifest
order, so edits to the markdown move the offsets automatically.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from api.evaluation import Dataset, parse_notes, parse_questions

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
SPLITS = ("dev", "test")
# The small example set shipped with scripts/optimize_chunk_size: the manifest's notes
# marked `example: true` (all from the dev split) and their first few questions.
EXAMPLE_DIR = HERE.parents[2] / "api" / "evaluation" / "example"
EXAMPLE_QUESTIONS_PER_NOTE = 4


def _read_yaml(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _dump(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _path(value: str | list[str]) -> list[str]:
    # "H2 > H3" strings avoid YAML flow-list pitfalls with commas and colons in headings.
    if isinstance(value, str):
        return [part.strip() for part in value.split(" > ")] if value.strip() else []
    return list(value)


def _check_item(item: Any, path: Path) -> None:
    # YAML quietly turns `a: yes` into a bool and ` #x` into a comment: insist on strings.
    ok = (
        isinstance(item, dict)
        and set(item) <= {"q", "t", "a", "h", "gold"}
        and all(isinstance(item.get(k), str) and item[k].strip() for k in ("q", "t", "a"))
        and ("h" in item) != ("gold" in item)
    )
    if not ok:
        raise SystemExit(f"{path}: malformed question entry {item!r}")


def build(src: Path = SRC) -> dict[str, str]:
    """Return {file name: JSONL text} for notes.jsonl and questions_<split>.jsonl."""
    manifest: list[dict[str, Any]] = _read_yaml(src / "manifest.yaml")
    split_of = {entry["id"]: entry["split"] for entry in manifest}
    bad = sorted(s for s in split_of.values() if s not in SPLITS)
    if bad:
        raise SystemExit(f"unknown split(s) {bad}")
    note_rows = []
    for entry in manifest:
        # newline="" keeps CRLF notes byte for byte: line endings are part of the data.
        with (src / "notes" / f"{entry['id']}.md").open(encoding="utf-8", newline="") as f:
            content = f.read()
        note_rows.append(
            {
                "id": entry["id"],
                "title": entry["title"],
                "content_md": content,
                "tags": list(entry.get("tags", [])),
            }
        )
    notes_text = _dump(note_rows)
    notes = parse_notes(notes_text)
    by_split: dict[str, list[dict[str, Any]]] = {split: [] for split in SPLITS}
    counter = 0
    for entry in manifest:
        path = src / "questions" / f"{entry['id']}.yaml"
        for item in _read_yaml(path) or []:
            counter += 1
            _check_item(item, path)
            if "gold" in item:
                gold = [{"note_id": g["note"], "headings": _path(g["h"])} for g in item["gold"]]
            else:
                gold = [{"note_id": entry["id"], "headings": _path(item["h"])}]
            for g in gold:
                if split_of.get(g["note_id"]) != entry["split"]:
                    raise SystemExit(f"{path}: gold note {g['note_id']} is in another split")
            row = {
                "id": f"q{counter:04d}",
                "question": item["q"],
                "gold": gold,
                "type": item["t"],
                "answer": item["a"],
            }
            by_split[entry["split"]].append(row)
    out = {"notes.jsonl": notes_text}
    example_ids = [e["id"] for e in manifest if e.get("example")]
    if any(split_of[i] != "dev" for i in example_ids):
        raise SystemExit("example notes must come from the dev split")
    for split, rows in by_split.items():
        # Resolve spans through the loader itself, so the files hold exactly what it checks.
        resolved = parse_questions(_dump(rows), notes, source=f"questions_{split}")
        for row, question in zip(rows, resolved, strict=True):
            row["gold"] = [
                {"note_id": g.note_id, "headings": list(g.headings), "span": list(g.span)}
                for g in question.gold
            ]
        out[f"questions_{split}.jsonl"] = _dump(rows)
    picked: list[dict[str, Any]] = []
    for note_id in example_ids:
        own = [r for r in by_split["dev"] if all(g["note_id"] in example_ids for g in r["gold"])]
        picked += [r for r in own if r["gold"][0]["note_id"] == note_id][
            :EXAMPLE_QUESTIONS_PER_NOTE
        ]
    out["example/notes.jsonl"] = _dump([r for r in note_rows if r["id"] in example_ids])
    out["example/questions.jsonl"] = _dump(picked)
    return out


def _target(name: str) -> Path:
    if name.startswith("example/"):
        return EXAMPLE_DIR / name.removeprefix("example/")
    return HERE / name


_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an the of to in on for and or is are was were be do does did i we our my me it its "
    "what how when where which who why with at by from this that there again any can should "
    "much many long get up if so into about as".split()
)


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2}


def stats(dataset_by_split: dict[str, Dataset]) -> str:
    """Counts per split and type, and question/gold word overlap (how paraphrased)."""
    lines = []
    for split, dataset in dataset_by_split.items():
        gold_notes = {g.note_id for q in dataset.questions for g in q.gold}
        types = Counter(q.type for q in dataset.questions)
        multi = sum(1 for q in dataset.questions if len(q.gold) > 1)
        lines.append(
            f"{split}: {len(dataset.questions)} questions over {len(gold_notes)} notes, "
            f"{multi} with several gold sections; types {dict(sorted(types.items()))}"
        )
        overlap: dict[str, list[float]] = {}
        for q in dataset.questions:
            words = _content_words(q.question)
            gold_words = set().union(*(_content_words(dataset.gold_text(g)) for g in q.gold))
            share = len(words & gold_words) / max(1, len(words))
            overlap.setdefault(q.type or "?", []).append(share)
        lines.append(
            "  share of question words found in gold text, by type: "
            + ", ".join(f"{t} {sum(v) / len(v):.2f}" for t, v in sorted(overlap.items()))
        )
    return "\n".join(lines)


def main() -> int:
    """Write (or with --check, verify) the JSONL files next to this script."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if files are stale")
    args = parser.parse_args()
    outputs = build()
    if args.check:
        stale = [
            n
            for n, t in outputs.items()
            if not _target(n).exists() or _target(n).read_text("utf-8") != t
        ]
        if stale:
            print(f"stale: {stale}; run build.py", file=sys.stderr)
            return 1
        return 0
    for name, text in outputs.items():
        _target(name).parent.mkdir(parents=True, exist_ok=True)
        _target(name).write_text(text, encoding="utf-8", newline="")
    notes = parse_notes(outputs["notes.jsonl"])
    by_split = {
        split: Dataset(notes, tuple(parse_questions(outputs[f"questions_{split}.jsonl"], notes)))
        for split in SPLITS
    }
    sections = sum(len(n.sections) for n in notes.values())
    print(f"{len(notes)} notes, {sections} leaf sections")
    print(stats(by_split))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
