"""Build the documentation-pages set's JSONL files from `src/`.

    python benchmarks/data/docs_pages/build.py           # rewrite the JSONL files, print stats
    python benchmarks/data/docs_pages/build.py --check   # exit 1 if the JSONL files are stale

Sources: `src/manifest.yaml` (id, title, package, version, licence, source and split of
every page), `src/pages/<id>.md` (the page as its project ships it, see extract.py) and
`src/questions/<id>.yaml` (questions whose gold is in that page). A question is
`{q, t, a, h}` with `h` the gold breadcrumb below the title ("H1 > H2"), or `{q, t, a, hl}`
with `hl` the last heading of the one section that ends with it (for breadcrumbs full of
badges), or `{q, t, a, gold: [{note, h | hl}, ...]}` when the answer is in several
sections (any one is enough). Spans are computed and checked by `api.evaluation`, never
typed by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from api.evaluation import parse_notes, parse_questions
from api.evaluation.dataset import Note

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
SPLITS = ("dev", "test")


def _read_yaml(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _dump(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _headings(note: Note, ref: dict[str, Any]) -> list[str]:
    """The gold breadcrumb of `ref` (`h` as written, or the section ending in `hl`)."""
    if "h" in ref:
        h = ref["h"]
        return [p.strip() for p in h.split(" > ")] if h.strip() else []
    last = ref["hl"]
    found = [s for s in note.sections if s.headings and s.headings[-1] == last]
    if len(found) != 1:
        raise SystemExit(f"{note.id}: {len(found)} sections end with heading {last!r}")
    return list(found[0].headings)


def _question_rows(manifest: list[dict[str, Any]], notes: dict[str, Note]) -> dict[str, list]:
    rows: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    number = 0
    for entry in manifest:
        path = SRC / "questions" / f"{entry['id']}.yaml"
        for item in _read_yaml(path) or []:
            number += 1
            refs = item.get("gold") or [{"note": entry["id"], **item}]
            gold = [
                {"note_id": r["note"], "headings": _headings(notes[r["note"]], r)} for r in refs
            ]
            rows[entry["split"]].append(
                {
                    "id": f"p{number:04d}",
                    "question": item["q"],
                    "type": item["t"],
                    "answer": item["a"],
                    "gold": gold,
                }
            )
    return rows


def build() -> dict[str, str]:
    """File name → content of every generated file."""
    manifest = _read_yaml(SRC / "manifest.yaml")
    note_rows = [
        {
            "id": e["id"],
            "title": e["title"],
            "content_md": (SRC / "pages" / f"{e['id']}.md").read_text(encoding="utf-8"),
            "tags": [e["package"]],
        }
        for e in manifest
    ]
    notes_text = _dump(note_rows)
    notes = parse_notes(notes_text)
    files = {"notes.jsonl": notes_text}
    for split, rows in _question_rows(manifest, notes).items():
        text = _dump(rows)
        parse_questions(text, notes, source=f"questions_{split}.jsonl")  # checks every span
        files[f"questions_{split}.jsonl"] = text
    return files


def _stats(files: dict[str, str]) -> str:
    notes = parse_notes(files["notes.jsonl"])
    out = [f"{len(notes)} pages, {sum(len(n.sections) for n in notes.values())} sections"]
    for split in SPLITS:
        qs = parse_questions(files[f"questions_{split}.jsonl"], notes)
        pages = {g.note_id for q in qs for g in q.gold}
        types = Counter(q.type for q in qs)
        out.append(f"{split}: {len(qs)} questions on {len(pages)} pages {dict(types)}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    files = build()
    stale = [
        n
        for n, t in files.items()
        if not (HERE / n).exists() or (HERE / n).read_text(encoding="utf-8") != t
    ]
    if args.check:
        if stale:
            print("stale:", ", ".join(stale), file=sys.stderr)
            return 1
        return 0
    for name, text in files.items():
        (HERE / name).write_text(text, encoding="utf-8")
    print(_stats(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
