"""Obsidian's markup as a reader sees it: `[[wikilinks]]` and `![[embeds]]` as their
readable text, and the `aliases` of a note's front matter. Pure: no I/O.

What is embedded and keyword-indexed is the readable text; `content_md` and the offsets
stay the note's own. A link reads as its label (`[[target|label]]` → "label"), else as its
target's name: the file name without folders or `.md`, and a heading as Obsidian shows it
(`[[Note#Setup]]` → "Note > Setup", a block reference `#^id` dropped). An embed's size
(`![[map.png|300]]`) is no label. Code spans and fenced blocks are left as written.
"""

from __future__ import annotations

import re
from typing import Any

_LINK_OR_CODE = re.compile(
    r"(?P<fence>^[ \t]{0,3}(?P<mark>`{3,}|~{3,}).*?^[ \t]{0,3}(?P=mark)[ \t]*$)"
    r"|(?P<code>(?P<ticks>`+)[^`\n].*?(?P=ticks))"
    r"|(?P<embed>!?)\[\[(?P<target>[^\[\]|\n]*)(?:\|(?P<label>[^\[\]\n]*))?\]\]",
    re.M | re.S,
)
_SIZE = re.compile(r"\s*\d+(?:\s*x\s*\d+)?\s*")
_MD_SUFFIX = re.compile(r"\.md$", re.I)
MAX_ALIASES = 20
MAX_ALIAS_CHARS = 200


def link_text(target: str, label: str | None, *, embed: bool) -> str:
    """The readable text of one wikilink or embed ("" when it has none)."""
    if label is not None and label.strip() and not (embed and _SIZE.fullmatch(label)):
        return " ".join(label.split())
    path, _, heading = target.partition("#")
    name = _MD_SUFFIX.sub("", path.strip().rsplit("/", 1)[-1]).strip()
    heading = "" if heading.startswith("^") else " ".join(heading.replace("#", " ").split())
    return " > ".join(part for part in (name, heading) if part)


def _readable(match: re.Match[str]) -> str:
    if match["target"] is None:  # code: as written
        return match[0]
    text = link_text(match["target"], match["label"], embed=bool(match["embed"]))
    return text or match[0]


def readable_links(text: str) -> str:
    """`text` with every wikilink and embed outside code as its readable text (module
    docstring); `text` itself when it has none."""
    if "[[" not in text:
        return text
    return _LINK_OR_CODE.sub(_readable, text)


def front_matter_aliases(fields: dict[str, Any]) -> list[str]:
    """The note's other names: front matter `aliases` (or `alias`), a list or one
    comma-separated string; whitespace collapsed, duplicates once, at most `MAX_ALIASES` of
    at most `MAX_ALIAS_CHARS` characters."""
    value = fields.get("aliases", fields.get("alias"))
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list):
        return []
    aliases: dict[str, None] = {}
    for item in items:
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            continue
        alias = " ".join(str(item).split())[:MAX_ALIAS_CHARS].strip()
        if alias:
            aliases.setdefault(alias, None)
    return list(aliases)[:MAX_ALIASES]
