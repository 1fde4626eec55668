"""Fault (c): the embedding provider down (5xx), slow (timeouts) or rate-limited (429 with
Retry-After), through the real `openai` client against the OpenAI-compatible stub.

A note that was indexed keeps its previous chunks searchable while its edit cannot be
embedded, stays queued (not failed) while the outage lasts, and converges to the new version
when the provider returns. A note never indexed goes pending -> failed after N attempts with
a clear error, and recovers with reindex. Search requests during the outage never answer
500 and never hang.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.conftest import Api, running_app
from tests.faults.support import (
    eventually,
    integrity_after_convergence,
    latency_figures,
    record,
)

OLD = "## Plan\n\nThe xylophone rehearsal moves to the small hall on Thursday."
NEW = "## Plan\n\nThe zeppelin rehearsal moves to the hangar on Friday."


@pytest.fixture
def provider_settings(make_settings: Any, openai_stub: Any) -> Any:
    def make(**overrides: Any) -> Any:
        return make_settings(**{
            "embedding_provider": "openai", "openai_api_key": "sk-test",
            "openai_base_url": openai_stub.base_url, "embedding_dimensions": 64,
            "openai_max_retries": 2, "openai_timeout_s": 1.0,
            "autonote_index_max_attempts": 100, "autonote_index_backoff_base_s": 0.2,
            "autonote_index_backoff_max_s": 1.0, "autonote_index_poll_s": 0.1, **overrides,
        })  # fmt: skip

    return make


async def keyword_hits(api: Api, headers: dict[str, str], word: str) -> list[dict[str, Any]]:
    resp = await api.client.post(
        "/v1/search", json={"query": word, "mode": "keyword"}, headers=headers
    )
    assert resp.status_code == 200, resp.text
    return resp.json()["results"]


async def note(api: Api, headers: dict[str, str], note_id: str) -> dict[str, Any]:
    resp = await api.client.get(f"/v1/notes/{note_id}", headers=headers)
    assert resp.status_code == 200, resp.text
    return resp.json()


def start_fault(stub: Any, mode: str) -> None:
    if mode == "down":
        stub.fail_next(500, count=100_000, path="/v1/embeddings")
    elif mode == "slow":
        stub.set_delay(3.0)  # > OPENAI_TIMEOUT_S=1: every call times out
    elif mode == "rate_limited":
        stub.fail_next(429, count=100_000, retry_after=0.5, path="/v1/embeddings")
    else:
        raise ValueError(mode)


async def run_mode(api: Api, stub: Any, mode: str, outage_s: float) -> dict[str, Any]:
    headers = await api.new_user(mode)
    resp = await api.client.post(
        "/v1/notes", json={"title": "Plan", "content_md": OLD}, headers=headers
    )
    note_id = resp.json()["id"]

    async def indexed_at(version: int) -> bool:
        doc = await note(api, headers, note_id)
        return doc["index_status"] == "indexed" and doc["indexed_version"] == version

    await eventually(lambda: indexed_at(1), 30, "first version indexed")
    stub.reset()
    start_fault(stub, mode)
    resp = await api.client.patch(f"/v1/notes/{note_id}", json={"content_md": NEW},
                                  headers=headers)  # fmt: skip
    assert resp.status_code == 200 and resp.json()["version"] == 2

    # During the outage: still queued, old version searchable, searches answer cleanly.
    started = time.monotonic()
    checks = old_found = 0
    statuses: list[str] = []
    search_latency: list[float] = []
    hybrid: dict[str, int] = {}
    while time.monotonic() - started < outage_s:
        doc = await note(api, headers, note_id)
        statuses.append(doc["index_status"])
        assert doc["index_status"] in ("pending", "indexing"), doc
        assert doc["indexed_version"] == 1
        hits = await keyword_hits(api, headers, "xylophone")
        checks += 1
        if [h["note_id"] for h in hits] == [note_id]:
            old_found += 1
            assert "xylophone" in hits[0]["matching_chunks"][0]["content"]
        assert await keyword_hits(api, headers, "zeppelin") == []
        t0 = time.monotonic()
        resp = await api.client.post("/v1/search", json={"query": "rehearsal"}, headers=headers)
        search_latency.append(time.monotonic() - t0)
        key = f"{resp.status_code}:{resp.json().get('error', resp.json().get('mode'))}"
        hybrid[key] = hybrid.get(key, 0) + 1
        await asyncio.sleep(0.2)
    calls_during = len(stub.requests_to("/v1/embeddings"))
    statuses_seen = sorted(set(statuses))
    answered = [c.status for c in stub.requests_to("/v1/embeddings")]
    # The search query's embedding calls come in pairs (OPENAI_MAX_RETRIES=2, one search at
    # a time): the second attempt of each pair must wait for the server's Retry-After.
    query_calls = [
        r for r in stub.requests_to("/v1/embeddings") if r.body["input"] == ["rehearsal"]
    ]
    gaps = [b.time - a.time for a, b in zip(query_calls[::2], query_calls[1::2], strict=False)]

    stub.reset()  # the provider is back
    recovered = time.monotonic()
    converge_s = await eventually(lambda: indexed_at(2), 60, "new version indexed")
    new_hits = await keyword_hits(api, headers, "zeppelin")
    assert [h["note_id"] for h in new_hits] == [note_id]
    assert await keyword_hits(api, headers, "xylophone") == []
    doc = await note(api, headers, note_id)
    assert doc["index_error"] is None and doc["chunk_count"] == 1
    report = await integrity_after_convergence(api)
    assert report.ok and not report.findings, report.to_dict()
    return {
        "old_version_searchable_checks": f"{old_found}/{checks}",
        "index_status_during_outage": statuses_seen,
        "embedding_calls_during_outage": calls_during,
        "provider_answers": sorted(set(answered)),
        "query_retry_gap_min_s": round(min(gaps), 2) if gaps else None,
        "hybrid_search_during_outage": hybrid,
        "hybrid_search_latency": latency_figures(search_latency),
        "converged_after_recovery_s": round(converge_s, 2),
        "recovered_at_offset_s": round(recovered - started, 1),
        "check_violations": len(report.violations),
    }


@pytest.mark.parametrize("mode", ["down", "slow", "rate_limited"])
async def test_outage_keeps_old_version_searchable_then_converges(
    provider_settings: Any, openai_stub: Any, mode: str
) -> None:
    async with running_app(provider_settings()) as api:
        figures = await run_mode(api, openai_stub, mode, outage_s=4)
    if mode == "rate_limited":
        assert figures["query_retry_gap_min_s"] >= 0.45, "Retry-After: 0.5 honoured"
    assert figures["old_version_searchable_checks"].split("/")[0] != "0"
    assert all(k.startswith(("200:", "503:")) for k in figures["hybrid_search_during_outage"])
    record(
        f"c_embedding_{mode}",
        {
            "down": "Embedding provider down (every call 500)",
            "slow": "Embedding provider slow (3 s per call, client timeout 1 s)",
            "rate_limited": "Embedding provider rate-limited (429, Retry-After 0.5 s)",
        }[mode],
        figures,
        "A note indexed at version 1 is edited while the provider is failing (4 s); "
        "OPENAI_MAX_RETRIES=2, OPENAI_TIMEOUT_S=1, reconciler backoff 0.2-1 s.",
    )


async def test_never_indexed_note_fails_after_n_attempts_then_reindex_recovers(
    provider_settings: Any, openai_stub: Any
) -> None:
    async with running_app(provider_settings(autonote_index_max_attempts=3)) as api:
        headers = await api.new_user()
        openai_stub.fail_next(500, count=100_000, path="/v1/embeddings")
        started = time.monotonic()
        resp = await api.client.post(
            "/v1/notes", json={"title": "Down", "content_md": "## A\n\nquokka facts"},
            headers=headers,
        )  # fmt: skip
        assert resp.status_code == 201 and resp.json()["index_status"] == "pending"
        note_id = resp.json()["id"]

        async def failed() -> bool:
            return (await note(api, headers, note_id))["index_status"] == "failed"

        fail_s = await eventually(failed, 60, "note failed")
        doc = await note(api, headers, note_id)
        assert "500" in doc["index_error"] and "EmbeddingError" in doc["index_error"]
        assert doc["index_attempts"] == 3 and doc["chunk_count"] == 0
        calls = len(openai_stub.requests_to("/v1/embeddings"))
        assert calls == 3 * 2, "3 reconciler attempts x 2 HTTP attempts, then it stopped"
        await asyncio.sleep(1.0)
        assert len(openai_stub.requests_to("/v1/embeddings")) == calls, "no retry after failed"
        assert await keyword_hits(api, headers, "quokka") == []

        openai_stub.reset()
        resp = await api.client.post(f"/v1/notes/{note_id}/reindex", headers=headers)
        assert resp.status_code == 202

        async def indexed() -> bool:
            return (await note(api, headers, note_id))["index_status"] == "indexed"

        recover_s = await eventually(indexed, 30, "indexed after reindex")
        assert [h["note_id"] for h in await keyword_hits(api, headers, "quokka")] == [note_id]
        report = await integrity_after_convergence(api)
        assert report.ok and not report.findings, report.to_dict()
    record(
        "c_embedding_never_indexed",
        "Never-indexed note while the provider is down: failed after N attempts, reindex",
        {
            "attempts_before_failed": 3,
            "http_calls": calls,
            "pending_to_failed_s": round(fail_s, 2),
            "index_error": doc["index_error"][:160],
            "reindex_to_indexed_s": round(recover_s, 2),
            "elapsed_s": round(time.monotonic() - started, 1),
            "check_violations": len(report.violations),
        },
        "AUTONOTE_INDEX_MAX_ATTEMPTS=3, OPENAI_MAX_RETRIES=2; the provider answers 500.",
    )
