"""Notes with no body text (only headings, or only a title) are found by keyword and
hybrid search: the chunker gives them one `outline` chunk (docs/chunking.md)."""

from __future__ import annotations

import pytest

from tests.conftest import Api
from tests.retrieval.api_helpers import note, search

HEADINGS_ONLY = "# Title\n## Kubernetes zebra\n"


async def test_a_note_of_headings_only_is_found_by_its_headings_and_title(api: Api) -> None:
    h = await api.new_user()
    await note(api, h, "Groceries", "## Monday\n\nMilk, eggs, bread.")
    n = await note(api, h, "Cluster plans", HEADINGS_ONLY)
    assert n["chunk_count"] == 1 and n["index_status"] == "indexed"
    for query in ("kubernetes zebra", "cluster plans"):
        for mode in ("keyword", "hybrid"):
            body = await search(api, h, query, mode=mode)
            assert body["results"] and body["results"][0]["note_id"] == n["id"], (query, mode)
    chunk = (await search(api, h, "zebra", mode="keyword"))["results"][0]["matching_chunks"][0]
    assert chunk["heading_path"] == ["Cluster plans"]
    assert chunk["content"] == HEADINGS_ONLY[chunk["start_offset"] : chunk["end_offset"]]
    assert chunk["content"] == HEADINGS_ONLY.strip()
    # Chat quotes the heading it was found by, as text (not as a heading in a list item).
    r = await api.client.post("/v1/chat", json={"message": "kubernetes zebra"}, headers=h)
    assert "\n- Kubernetes zebra [1]" in r.json()["answer"]


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
async def test_a_title_only_note_is_found_by_its_title(api: Api, content: str) -> None:
    h = await api.new_user()
    await note(api, h, "Groceries", "## Monday\n\nMilk, eggs, bread.")
    n = await note(api, h, "Quarterly okapi review", content)
    assert n["chunk_count"] == 1 and n["index_status"] == "indexed"
    for mode in ("keyword", "hybrid"):
        body = await search(api, h, "okapi review", mode=mode)
        assert body["results"] and body["results"][0]["note_id"] == n["id"], mode
        chunk = body["results"][0]["matching_chunks"][0]
        assert chunk["heading_path"] == ["Quarterly okapi review"]
        assert (chunk["content"], chunk["start_offset"], chunk["end_offset"]) == ("", 0, 0)
    # Chat cites it by its title (not by an empty quote).
    r = await api.client.post("/v1/chat", json={"message": "okapi review"}, headers=h)
    assert "\n- Quarterly okapi review [1]" in r.json()["answer"]
