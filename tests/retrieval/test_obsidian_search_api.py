"""Obsidian notes in search: a note is found by its front matter aliases, and a wikilink
is keyword-indexed as its readable text, not its target's path; citations keep the note's
own text and offsets."""

from __future__ import annotations

from tests.conftest import Api
from tests.retrieval.api_helpers import note, search

KYOTO = """---
aliases: [Quokkaland expedition]
---
## Plan

Day one follows [[archive/zanzibarish/Day one.md|the first itinerary]] through the temples.
"""


async def test_aliases_and_link_text_are_what_keyword_search_sees(api: Api) -> None:
    h = await api.new_user()
    kyoto = await note(api, h, "Kyoto", KYOTO)
    await note(api, h, "Bread", "## Dough\n\nFlour, water, salt and yeast.")
    by_alias = await search(api, h, "quokkaland expedition", mode="keyword")
    assert [r["note_id"] for r in by_alias["results"]] == [kyoto["id"]]
    by_label = await search(api, h, "first itinerary", mode="keyword")
    assert [r["note_id"] for r in by_label["results"]] == [kyoto["id"]]
    section = by_label["results"][0]["matching_chunks"][0]
    assert "[[archive/zanzibarish/Day one.md|the first itinerary]]" in section["content"]
    assert KYOTO[section["start_offset"] : section["end_offset"]] == section["content"]
    # The link's target path is not the note's text.
    assert (await search(api, h, "zanzibarish", mode="keyword"))["results"] == []
    # The vector side embeds the aliases too: the alias alone finds the note.
    by_vector = await search(api, h, "Quokkaland expedition", mode="vector", limit=1)
    assert [r["note_id"] for r in by_vector["results"]] == [kyoto["id"]]
