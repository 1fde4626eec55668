"""Search and chat have their own body limits, below the general one: every valid request
still fits, and a body past the limit is refused from its Content-Length, unread.

An authenticated user could send 8 MB of JSON to `/v1/search`, parsed on the event loop for
~0.5 s while every other request waited. The worst valid bodies are built here from the
schemas' maxima, every character `\\u`-escaped and the free text astral (a surrogate pair,
12 bytes per character).
"""

from __future__ import annotations

import json
from typing import Any

from api.chat.schemas import CHAT_MAX_BODY_BYTES
from api.retrieval.schemas import SEARCH_MAX_BODY_BYTES
from tests.conftest import Api
from tests.helpers import raw_post

WIDE = "😀"  # one character, 12 bytes once JSON-escaped
FILTERS = {
    "tags": [f"{n:03d}" + WIDE * 509 for n in range(100)],
    "note_ids": [f"{n:024x}" for n in range(1000)],
    "updated_after": "2020-01-01T00:00:00Z",
}
WORST_SEARCH = {
    "query": WIDE * 2000,
    "limit": 50,
    "chunks_per_note": 20,
    "mode": "hybrid",
    "filters": FILTERS,
}
WORST_CHAT = {
    "message": WIDE * 8000,
    "history": [
        {"role": "user" if n % 2 == 0 else "assistant", "content": WIDE * 8000} for n in range(20)
    ],
    "filters": FILTERS,
    "stream": False,
}


def encoded(value: Any) -> bytes:
    """JSON with every character of every string `\\u`-escaped (astral ones as surrogate
    pairs): the widest encoding a client can send without padding."""
    if isinstance(value, dict):
        items = (encoded(k) + b": " + encoded(v) for k, v in value.items())
        return b"{" + b", ".join(items) + b"}"
    if isinstance(value, list):
        return b"[" + b", ".join(encoded(v) for v in value) + b"]"
    if isinstance(value, str):
        units = value.encode("utf-16-be")
        pairs = (units[i : i + 2].hex() for i in range(0, len(units), 2))
        return b'"' + "".join(f"\\u{u}" for u in pairs).encode() + b'"'
    return json.dumps(value).encode()


async def test_the_largest_valid_search_and_chat_bodies_fit_their_limits(api: Api) -> None:
    h = await api.new_user()
    search, chat = encoded(WORST_SEARCH), encoded(WORST_CHAT)
    assert json.loads(search) == WORST_SEARCH and json.loads(chat) == WORST_CHAT
    assert 750_000 < len(search) <= SEARCH_MAX_BODY_BYTES
    assert 2_750_000 < len(chat) <= CHAT_MAX_BODY_BYTES
    headers = {**h, "Content-Type": "application/json"}
    r = await api.client.post("/v1/search", content=search, headers=headers)
    assert r.status_code == 200, r.text[:300]
    r = await api.client.post("/v1/chat", content=chat, headers=headers)
    assert r.status_code == 200, r.text[:300]
    assert r.json()["mode"] == "extractive"


async def test_a_body_past_the_route_limit_is_refused_unread(api: Api) -> None:
    h = await api.new_user()
    for path, limit in (("/v1/search", SEARCH_MAX_BODY_BYTES), ("/v1/chat", CHAT_MAX_BODY_BYTES)):
        # Valid JSON, padded with whitespace just past the limit: still under the 8 MB
        # general one, which used to let it through to the parser.
        body = b'{"query": "x", "message": "x"}'
        body += b" " * (limit + 1 - len(body))
        response = await raw_post(api.app, path, h, body)
        assert response.status == 413, path
        assert response.reads == 0, path
        assert f"limit of {limit} bytes" in json.loads(response.body)["detail"]
    # Other routes keep the general limit: a 1.95 MB note (under the 2 MB note limit) is
    # stored, its body past the search limit.
    content = "word " * 390_000
    r = await api.client.post("/v1/notes", json={"title": "ok", "content_md": content}, headers=h)
    assert r.status_code == 201, r.text[:300]
    assert len(encoded({"title": "ok", "content_md": content})) > SEARCH_MAX_BODY_BYTES
