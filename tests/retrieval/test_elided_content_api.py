"""A note with a pasted screenshot (`data:` URI) through the running API: a few chunks, a
few embeddings, the image kept in its section, search and chat showing its place and alt
text, not its base64 (as base64 the note would be ~740 chunks to embed)."""

from __future__ import annotations

import base64
import random

from tests.conftest import Api
from tests.helpers import wait_indexed

PAYLOAD = base64.b64encode(random.Random(7).randbytes(225_000)).decode()
NOTE = (
    "## Route\n\nThe route we took through the old town:\n\n"
    f"![route map](data:image/png;base64,{PAYLOAD})\n\n"
    "Then we walked to the zebra museum by the river.\n\n"
    "## Food\n\nRamen at the station, twice.\n"
)


async def test_a_pasted_image_is_stored_whole_and_embedded_as_its_place(api: Api) -> None:
    h = await api.new_user()
    r = await api.client.post("/v1/notes", json={"title": "Kyoto", "content_md": NOTE}, headers=h)
    assert r.status_code == 201, r.text
    note = await wait_indexed(api, h, r.json()["id"])
    assert note["chunk_count"] == 2
    stats = note["last_index_stats"]
    assert stats["embedded"] == 2 and stats["tokens_embedded"] < 200, stats

    r = await api.client.post(
        "/v1/search", json={"query": "zebra museum", "mode": "hybrid"}, headers=h
    )
    assert r.status_code == 200, r.text
    (hit,) = r.json()["results"]
    section = hit["matching_chunks"][0]
    # The section is cited where it is in the note; the response shows the image's place,
    # not its 300 KB (GET the note for them), and says how much it left out.
    cited = NOTE[section["start_offset"] : section["end_offset"]]
    assert cited.startswith("The route we took") and PAYLOAD in cited
    assert section["content"] == cited.replace(PAYLOAD, "…")
    assert section["elided_chars"] == len(PAYLOAD) and len(r.content) < 10_000

    r = await api.client.post(
        "/v1/chat/context", json={"message": "what did we see after the route?"}, headers=h
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert PAYLOAD[:50] not in str(body) and "base64,…" in str(body)
    route = next(c for c in body["citations"] if c["heading_path"][-1] == "Route")
    assert NOTE[route["start_offset"] : route["end_offset"]].startswith("The route we took")


async def test_a_megabyte_section_is_cut_in_search_responses(api: Api) -> None:
    """The local model reads an 8 000-letter word as one unknown token, so 60 of them are
    one 480 KB chunk; every search hit on it returned it whole. Now 64 000 characters."""
    h = await api.new_user()
    body = " ".join(["q" * 8_000] * 60) + " zebra"
    text = f"## Big\n\n{body}\n"
    r = await api.client.post("/v1/notes", json={"title": "Big", "content_md": text}, headers=h)
    await wait_indexed(api, h, r.json()["id"])
    r = await api.client.post("/v1/search", json={"query": "zebra", "mode": "keyword"}, headers=h)
    assert r.status_code == 200, r.text
    (section,) = r.json()["results"][0]["matching_chunks"]
    cited = text[section["start_offset"] : section["end_offset"]]
    assert cited == body and len(r.content) < 70_000
    assert section["content"] == body[:64_000] + "…"
    assert section["elided_chars"] == len(body) - 64_000
