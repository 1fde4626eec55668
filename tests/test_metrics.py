"""/metrics exposes the OpenTelemetry instruments in Prometheus text format."""

from __future__ import annotations

import re
from typing import Any

from tests.conftest import Api, running_app
from tests.helpers import wait_indexed


def sample(text: str, name: str) -> float:
    values = [float(m.group(1)) for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)]
    assert values, f"{name} missing"
    return sum(values)


async def test_metrics_follow_indexing_and_search(api: Api) -> None:
    before = (await api.client.get("/metrics")).text
    h = await api.new_user()
    r = await api.client.post(
        "/v1/notes", json={"title": "M", "content_md": "## A\n\nalpha\n\n## B\n\nbeta"}, headers=h
    )
    await wait_indexed(api, h, r.json()["id"])
    await api.client.post("/v1/search", json={"query": "alpha"}, headers=h)
    resp = await api.client.get("/metrics")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    text = resp.text
    assert (
        sample(text, "chunks_created_total") >= sample(before, "chunks_created_total") + 2
        if "chunks_created_total" in before
        else sample(text, "chunks_created_total") >= 2
    )
    for name in (
        "chunks_embedded_total",
        "embedding_tokens_total",
        "chunk_search_duration_milliseconds_count",
        "index_lag_milliseconds_count",
        "index_duration_milliseconds_count",
        "http_server_request_duration_seconds_count",  # FastAPI's request-latency histogram
    ):
        assert sample(text, name) >= 1, name
    assert "index_queue_depth" in text
    assert 'http_route="/v1/search"' in text


async def test_metrics_token(make_settings: Any) -> None:
    async with running_app(make_settings(autonote_metrics_token="s3cret")) as api:
        assert (await api.client.get("/metrics")).status_code == 401
        ok = await api.client.get("/metrics", headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200


async def test_made_up_methods_share_one_label(api: Api) -> None:
    """Requests with invented methods (405, no key needed) are labelled `_OTHER`: each
    distinct label is a series, and past the SDK's limit (2 000) real routes' series would
    be lumped into the overflow series."""
    for i in range(50):
        assert (await api.client.request(f"JUNK{i:03d}", "/healthz")).status_code == 405
    text = (await api.client.get("/metrics")).text
    assert "JUNK" not in text
    assert 'http_request_method="_OTHER"' in text


async def test_metrics_token_answers_like_every_route(make_settings: Any) -> None:
    async with running_app(make_settings(autonote_metrics_token="s3cret")) as api:
        for auth in ("Bearer nope", "s3cret", "Basic s3cret", ""):
            r = await api.client.get("/metrics", headers={"Authorization": auth} if auth else {})
            assert r.status_code == 401, auth
            assert r.json()["error"] == "unauthorized" and r.headers["www-authenticate"] == "Bearer"
        for auth in ("Bearer s3cret", "bearer s3cret", "BEARER  s3cret"):
            r = await api.client.get("/metrics", headers={"Authorization": auth})
            assert r.status_code == 200, auth
