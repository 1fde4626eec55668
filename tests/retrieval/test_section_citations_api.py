"""Search and chat citations are sections of the note: same-named sibling sections stay
apart, whatever their heading form and also while an edit waits to be indexed (chunks
carry `section_index`)."""

from __future__ import annotations

from typing import Any

from tests.conftest import Api, running_app
from tests.helpers import wait_indexed

SETEXT = (
    "Setup\n=====\n\nInstall the zebra package on every host.\n\n"
    "Billing\n=======\n\nInvoices are sent on the first monday of the month.\n\n"
    "Setup\n=====\n\nConfigure the zebra daemon afterwards.\n"
)


async def _sections(api: Api, h: dict[str, str], **body: Any) -> list[dict[str, Any]]:
    r = await api.client.post("/v1/search", json=body, headers=h)
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert results, r.text
    return results[0]["matching_chunks"]


async def test_keyword_search_never_merges_setext_sibling_sections_across_another_section(
    api: Api,
) -> None:
    h = await api.new_user()
    r = await api.client.post("/v1/notes", json={"title": "Ops", "content_md": SETEXT}, headers=h)
    await wait_indexed(api, h, r.json()["id"])
    sections = await _sections(api, h, query="zebra", mode="keyword", chunks_per_note=10)
    for s in sections:
        # No cited span may contain the unrelated "Billing" section.
        assert "Invoices" not in s["content"], s
    assert len(sections) == 2


async def test_chat_citation_never_spans_another_section(api: Api) -> None:
    h = await api.new_user()
    r = await api.client.post("/v1/notes", json={"title": "Ops", "content_md": SETEXT}, headers=h)
    await wait_indexed(api, h, r.json()["id"])
    # Many other chunks so that the unrelated middle section falls out of the vector
    # candidates and only the keyword list returns the two "zebra" chunks.
    filler = "\n\n".join(
        f"## Topic {i}\n\nCompletely different words about zebra migration number {i}."
        for i in range(150)
    )
    r = await api.client.post(
        "/v1/notes", json={"title": "Filler", "content_md": filler}, headers=h
    )
    await wait_indexed(api, h, r.json()["id"])
    r = await api.client.post(
        "/v1/chat/context",
        json={"message": "zebra package daemon setup"},
        headers=h,
    )
    cites = [c for c in r.json()["citations"] if c["title"] == "Ops"]
    assert any(c["heading_path"][-1] == "Setup" for c in cites), cites
    bodies = ("Install the zebra", "Invoices are sent", "Configure the zebra")
    for c in cites:
        span = SETEXT[c["start_offset"] : c["end_offset"]]
        # One section per citation. The Billing section may be cited in its own right
        # (whether it is depends on the vector candidates).
        assert sum(body in span for body in bodies) == 1, c
        assert ("Invoices" in span) == (c["heading_path"][-1] == "Billing"), c


DUP = (
    "## Setup\n\nInstall the zebra package on every host.\n\n"
    "## Setup\n\nConfigure the zebra daemon afterwards.\n"
)


async def test_sibling_sections_stay_apart_while_a_content_edit_is_pending(
    make_settings: Any,
) -> None:
    async with running_app(make_settings(autonote_index_workers=0)) as api:
        h = await api.new_user()
        r = await api.client.post("/v1/notes", json={"title": "Ops", "content_md": DUP}, headers=h)
        note_id = r.json()["id"]
        assert (await api.container.indexing.reconciler.run_once()) is not None
        q = {"query": "zebra package daemon", "chunks_per_note": 5}

        async def sections() -> list[dict[str, Any]]:
            r = await api.client.post("/v1/search", json=q, headers=h)
            return r.json()["results"][0]["matching_chunks"]

        before = await sections()
        assert len(before) == 2  # two sibling "Setup" sections: two citations
        r = await api.client.patch(
            f"/v1/notes/{note_id}", json={"content_md": DUP + "\nA new line.\n"}, headers=h
        )
        assert r.status_code == 200 and r.json()["indexed_version"] == 1
        after = await sections()
        assert sorted((s["start_offset"], s["end_offset"]) for s in after) == sorted(
            (s["start_offset"], s["end_offset"]) for s in before
        ), [(s["start_offset"], s["end_offset"], s["content"]) for s in after]
        ctx = await api.client.post("/v1/chat/context", json={"message": q["query"]}, headers=h)
        spans = [(c["start_offset"], c["end_offset"]) for c in ctx.json()["citations"]]
        assert all("## Setup" not in DUP[a:b] for a, b in spans), spans


async def test_the_chunks_listing_shows_each_chunks_section(api: Api) -> None:
    h = await api.new_user()
    r = await api.client.post("/v1/notes", json={"title": "Ops", "content_md": SETEXT}, headers=h)
    await wait_indexed(api, h, r.json()["id"])
    listing = await api.client.get(f"/v1/notes/{r.json()['id']}/chunks", headers=h)
    items = listing.json()["items"]
    assert [(c["section_path"], c["section_index"]) for c in items] == [
        ("Ops > Setup", 0),
        ("Ops > Billing", 1),
        ("Ops > Setup", 2),
    ]


async def test_a_merged_section_of_a_long_note_is_cut_without_reading_the_note(
    api: Api,
) -> None:
    """Two hits in one section are merged into one citation cut from the note's text,
    reading only windows of at most `max_section_chars` after each hit, not the whole
    note; the cut is exact."""
    h = await api.new_user()
    filler = "\n\n".join(
        f"## Chapter {i}\n\n" + f"Ordinary prose about harbour logistics, part {i}. " * 20
        for i in range(30)
    )
    steps = "\n\n".join(
        f"Step {i}: rotate the quokka signing key on host {i} and confirm the audit log."
        for i in range(50)
    )
    content = f"{filler}\n\n## Key rotation\n\n{steps}\n\n{filler.replace('Chapter', 'Annex')}\n"
    assert len(content) > 60_000
    r = await api.client.post("/v1/notes", json={"title": "Ops", "content_md": content}, headers=h)
    await wait_indexed(api, h, r.json()["id"])
    queries = api.container.search.notes
    reads: list[int] = []
    original = queries.text_windows

    async def counting(author_id: Any, windows: Any) -> Any:
        docs = await original(author_id, windows)
        reads.extend(len(t) for d in docs for t in d["windows"] or [])
        return docs

    queries.text_windows = counting
    sections = await _sections(api, h, query="quokka signing key", mode="keyword")
    merged = [s for s in sections if len(s["chunk_ids"]) > 1]
    assert merged, sections
    for s in sections:
        assert content[s["start_offset"] : s["end_offset"]] == s["content"]
    assert 0 < sum(reads) <= 6000 * len(merged[0]["chunk_ids"]) < len(content) // 2
