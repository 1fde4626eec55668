"""Indexing through the OpenAI connector end to end: the real `openai` client against the
local OpenAI-compatible stub server (tests/stubs)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import running_app
from tests.helpers import openai_indexing_settings, wait_indexed


@pytest.fixture
def openai_settings(make_settings: Any, openai_stub: Any) -> Any:
    return openai_indexing_settings(
        make_settings, openai_stub.base_url, autonote_index_max_attempts=2
    )


async def test_one_request_embeds_a_thousand_chunks(openai_settings: Any, openai_stub: Any) -> None:
    content = "\n".join(f"## Topic {i}\n\nFact number {i} about the system.\n" for i in range(1000))
    async with running_app(openai_settings()) as api:
        h = await api.new_user()
        r = await api.client.post(
            "/v1/notes", json={"title": "Many", "content_md": content}, headers=h
        )
        note = await wait_indexed(api, h, r.json()["id"], timeout_s=120)
        assert note["chunk_count"] == 1000 and note["last_index_stats"]["embedded"] == 1000
        assert note["embedding_model"] == "text-embedding-3-small@1536"
        calls = openai_stub.requests_to("/v1/embeddings")
        assert len(calls) == 1, "one batched request, not one per chunk (1000)"
        assert len(calls[0].body["input"]) == 1000
        assert calls[0].body["model"] == "text-embedding-3-small"
        doc = await api.container.db.note_chunks.find_one({})
        assert doc["embedding"].subtype == 9 and len(bytes(doc["embedding"])) == 2 + 4 * 1536


async def test_429_and_500_are_retried_honouring_retry_after(
    openai_settings: Any, openai_stub: Any
) -> None:
    async with running_app(openai_settings()) as api:
        h = await api.new_user()
        openai_stub.fail_next(429, count=1, retry_after=1, path="/v1/embeddings")
        openai_stub.fail_next(500, count=1, path="/v1/embeddings")
        r = await api.client.post(
            "/v1/notes", json={"title": "Retry", "content_md": "## A\n\nx"}, headers=h
        )
        note = await wait_indexed(api, h, r.json()["id"])
        calls = openai_stub.requests_to("/v1/embeddings")
        assert [c.status for c in calls] == [429, 500, 200]
        assert calls[1].time - calls[0].time >= 0.95, "waited for Retry-After: 1"
        assert note["index_attempts"] == 0 and note["index_error"] is None


async def test_gives_up_after_n_attempts_then_reindex_recovers(
    openai_settings: Any, openai_stub: Any
) -> None:
    async with running_app(openai_settings()) as api:
        h = await api.new_user()
        openai_stub.fail_next(500, count=100, path="/v1/embeddings")
        r = await api.client.post(
            "/v1/notes", json={"title": "Down", "content_md": "## A\n\nx"}, headers=h
        )
        url = f"/v1/notes/{r.json()['id']}"
        with pytest.raises(AssertionError, match="indexing failed"):
            await wait_indexed(api, h, r.json()["id"], timeout_s=60)
        failed = (await api.client.get(url, headers=h)).json()
        assert failed["index_status"] == "failed" and "500" in failed["index_error"]
        # 2 reconciler attempts x 3 HTTP attempts each, then it stopped trying.
        assert len(openai_stub.requests_to("/v1/embeddings")) == 6
        assert failed["chunk_count"] == 0
        openai_stub.reset()
        r = await api.client.post(f"{url}/reindex", headers=h)
        assert r.status_code == 202
        ok = await wait_indexed(api, h, failed["id"])
        assert ok["chunk_count"] == 1 and ok["index_error"] is None
