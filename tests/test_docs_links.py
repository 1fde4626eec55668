"""Every relative link in the documentation resolves: README.md, BENCHMARKS.md and
docs/**/*.md. A link to a file must name an existing file or folder inside the repository;
a `#anchor` must name a heading of the target markdown file (GitHub's slugs). External
http(s) and mailto links are not fetched. The configuration page lists every setting."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target "title") and ![alt](target); the target may be wrapped in <...>.
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
_EXTERNAL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")  # http:, https:, mailto:, ...


def doc_files(root: Path = ROOT) -> list[Path]:
    """The documentation files whose links are checked."""
    files = [root / "README.md", root / "BENCHMARKS.md"]
    files += sorted((root / "docs").rglob("*.md"))
    return [f for f in files if f.is_file()]


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, inline code removed."""
    lines: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = _FENCE.match(line)
        if fence is not None:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
            continue
        if match:
            fence = match.group(1)
            continue
        lines.append((number, _INLINE_CODE.sub("", line)))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lower-cased, punctuation other than `-` and
    `_` removed, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link reads as its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = text.strip().lower()
    kept = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a markdown text; repeated slugs get -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    fence: str | None = None
    for line in text.splitlines():
        match = _FENCE.match(line)
        if fence is not None:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
            continue
        if match:
            fence = match.group(1)
            continue
        heading = _HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every inline and reference-style link outside code."""
    found: list[tuple[int, str]] = []
    for number, line in _prose_lines(text):
        targets = [m.group(1) for m in _LINK.finditer(line)]
        reference = _REFERENCE.match(line)
        if reference:
            targets.append(reference.group(1))
        found += [(number, t[1:-1] if t.startswith("<") else t) for t in targets]
    return found


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """What is wrong with the relative links of the markdown file at `path`."""
    problems: list[str] = []
    text = path.read_text(encoding="utf-8")
    for number, target in links(text):
        where = f"{path.relative_to(root)}:{number}: {target}"
        if _EXTERNAL.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        file_part = unquote(file_part)
        resolved = (path.parent / file_part).resolve() if file_part else path.resolve()
        if not resolved.is_relative_to(root.resolve()):
            problems.append(f"{where}: points outside the repository")
            continue
        if not resolved.exists():
            problems.append(f"{where}: no such file")
            continue
        if anchor and resolved.is_file() and resolved.suffix == ".md":
            if unquote(anchor).lower() not in anchors(resolved.read_text(encoding="utf-8")):
                problems.append(f"{where}: no heading with this anchor")
    return problems


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    assert broken_links(path) == []


def test_the_documentation_is_there() -> None:
    names = {str(p.relative_to(ROOT)) for p in doc_files()}
    assert {"README.md", "docs/architecture.md", "docs/configuration.md"} <= names


def test_the_checker_reports_broken_links_and_anchors(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other page\n\n## Read-your-writes `now`\n")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "# Page\n\n"
        "[ok](other.md) [ok anchor](other.md#read-your-writes-now) [self](#page)\n"
        "[missing](missing.md) [bad anchor](other.md#nope) [bad self](#nowhere)\n"
        "[outside](../../x.md) [web](https://example.com/missing.md)\n"
        "`[in code](missing-too.md)`\n\n"
        "```\n[in a fence](missing-three.md)\n```\n"
    )
    problems = broken_links(page, root=tmp_path)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "missing.md: no such file",
        "other.md#nope: no heading with this anchor",
        "#nowhere: no heading with this anchor",
        "../../x.md: points outside the repository",
    ]


def test_slugs_follow_github() -> None:
    assert slug("Leases, fenced commits & eviction") == "leases-fenced-commits--eviction"
    assert slug("`rrf_k` = 1") == "rrf_k--1"
    assert slug("[Search](search.md) backends") == "search-backends"
    text = "# A\n## Notes\n## Notes\n```\n# not a heading\n```\n"
    assert anchors(text) == {"a", "notes", "notes-1"}


def test_configuration_page_lists_every_setting() -> None:
    from api.config import Settings

    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = [name.upper() for name in Settings.model_fields if f"`{name.upper()}`" not in page]
    assert missing == []
