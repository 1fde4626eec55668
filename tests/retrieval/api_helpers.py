"""Helpers of the search API tests: add a note and wait until it is indexed; search."""

from __future__ import annotations

from typing import Any

from tests.conftest import Api
from tests.helpers import wait_indexed


async def note(
    api: Api, h: dict[str, str], title: str, content: str, tags: list[str] | None = None
) -> dict[str, Any]:
    r = await api.client.post(
        "/v1/notes", json={"title": title, "content_md": content, "tags": tags or []}, headers=h
    )
    assert r.status_code == 201, r.text
    return await wait_indexed(api, h, r.json()["id"])


async def search(api: Api, h: dict[str, str], query: str, **body: Any) -> dict[str, Any]:
    r = await api.client.post("/v1/search", json={"query": query, **body}, headers=h)
    assert r.status_code == 200, r.text
    return r.json()
