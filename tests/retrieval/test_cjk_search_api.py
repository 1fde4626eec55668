"""Keyword search (BM25, `mode: keyword`, and the keyword half of hybrid) finds a CJK word
inside a sentence through the API, although FTS5's unicode61 tokenizer keeps a whole run
of CJK characters as one token."""

from __future__ import annotations

from tests.conftest import Api
from tests.helpers import wait_indexed

NOTE = "## 天気\n\n東京の天気は晴れです。大阪では雨が降っています。\n"


async def test_keyword_search_finds_a_cjk_word_inside_a_sentence(api: Api) -> None:
    h = await api.new_user()
    r = await api.client.post("/v1/notes", json={"title": "メモ", "content_md": NOTE}, headers=h)
    note_id = (await wait_indexed(api, h, r.json()["id"]))["id"]
    found = {}
    for q in ["東京", "大阪"]:
        r = await api.client.post("/v1/search", json={"query": q, "mode": "keyword"}, headers=h)
        found[q] = [n["note_id"] for n in r.json()["results"]]
    assert found == {"東京": [note_id], "大阪": [note_id]}
