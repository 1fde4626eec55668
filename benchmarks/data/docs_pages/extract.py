"""Copy the documentation pages of this set out of the packages that ship them.

    python benchmarks/data/docs_pages/extract.py --sdist-dir DIR   # rewrite src/pages/
    python benchmarks/data/docs_pages/extract.py --check ...       # exit 1 if a page differs

Each page in `src/manifest.yaml` names where it comes from (`source`):

- `metadata:<dist>`: the long description in the installed wheel's METADATA (the
  package's README as published on PyPI), read with `importlib.metadata`;
- `sdist:<file>:<member>`: a file of a source distribution in `--sdist-dir`
  (`pip download --no-deps --no-binary :all: <dist>==<version>`);
- `fixture:<file>`: a README already kept in `tests/fixtures/markdown/`.

`cut` (optional) is a heading line: the page ends before it (a changelog appended to a
README). Nothing else is changed: the pages are the projects' own text, under their own
licences (see README.md here); the versions are pinned in the manifest.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
import tarfile
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
PAGES = HERE / "src" / "pages"
FIXTURES = HERE.parents[2] / "tests" / "fixtures" / "markdown"


def _metadata_text(dist: str, version: str) -> str:
    meta = importlib.metadata.metadata(dist)
    if meta["Version"] != version:
        raise SystemExit(f"{dist}: installed {meta['Version']}, the manifest pins {version}")
    return str(meta.get_payload() or meta.get("Description") or "")


def _sdist_text(sdist_dir: Path, name: str, member: str) -> str:
    with tarfile.open(sdist_dir / name) as archive:
        handle = archive.extractfile(member)
        if handle is None:
            raise SystemExit(f"{name}: no file {member}")
        return handle.read().decode("utf-8")


def page_text(entry: dict[str, Any], sdist_dir: Path | None) -> str:
    """The page's markdown as its source holds it, cut before `cut` when given."""
    kind, _, rest = str(entry["source"]).partition(":")
    if kind == "metadata":
        text = _metadata_text(rest, str(entry["version"]))
    elif kind == "sdist":
        if sdist_dir is None:
            raise SystemExit("--sdist-dir is needed for sdist pages")
        name, _, member = rest.partition(":")
        text = _sdist_text(sdist_dir, name, member)
    elif kind == "fixture":
        text = (FIXTURES / rest).read_text(encoding="utf-8")
    else:
        raise SystemExit(f"{entry['id']}: unknown source {entry['source']!r}")
    cut = entry.get("cut")
    if cut:
        at = text.find("\n" + cut + "\n")
        if at < 0:
            raise SystemExit(f"{entry['id']}: cut line {cut!r} not found")
        text = text[: at + 1]
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sdist-dir", type=Path)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    manifest = yaml.safe_load((HERE / "src" / "manifest.yaml").read_text(encoding="utf-8"))
    stale = []
    PAGES.mkdir(parents=True, exist_ok=True)
    for entry in manifest:
        path = PAGES / f"{entry['id']}.md"
        text = page_text(entry, args.sdist_dir)
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(entry["id"])
            continue
        path.write_text(text, encoding="utf-8", newline="")
    if stale:
        print("differs from its source:", ", ".join(stale), file=sys.stderr)
        return 1
    print(f"{len(manifest)} pages {'checked' if args.check else 'written'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
