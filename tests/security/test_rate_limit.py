"""Per-key rate limiting (AUTONOTE_RATE_LIMIT_PER_MINUTE, a token bucket per API key): one
budget across every route of a key, 429 with an honest `Retry-After`, nothing done for a
limited request, and other keys — of another user or of the same user — unaffected."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.conftest import ADMIN_TOKEN, running_app
from tests.security.acl_rows import ROWS

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def assert_limited(resp: Any) -> int:
    """A well-formed 429; returns its Retry-After in seconds."""
    assert resp.status_code == 429, resp.text
    assert resp.json() == {"error": "rate_limited", "detail": resp.json()["detail"]}
    retry_after = int(resp.headers["retry-after"])
    assert retry_after >= 1
    return retry_after


async def test_one_budget_per_key_across_routes(make_settings: Any) -> None:
    async with running_app(make_settings(autonote_rate_limit_per_minute=6)) as api:
        created = (
            await api.client.post("/v1/admin/users", json={"name": "a"}, headers=ADMIN)
        ).json()
        key = {"Authorization": f"Bearer {created['api_key']}"}
        second = (
            await api.client.post(f"/v1/admin/users/{created['user_id']}/keys", headers=ADMIN)
        ).json()
        same_user_other_key = {"Authorization": f"Bearer {second['api_key']}"}
        other_user = await api.new_user("b")

        calls = [
            ("GET", "/v1/me", {}),
            ("GET", "/v1/notes", {}),
            ("POST", "/v1/search", {"json": {"query": "x"}}),
            ("POST", "/v1/notes", {"json": {"title": "t", "content_md": "c"}}),
            ("POST", "/v1/chat/context", {"json": {"message": "x"}}),
            ("GET", "/v1/notes", {"params": {"status": "trashed"}}),
        ]
        for method, url, kwargs in calls:
            resp = await api.client.request(method, url, headers=key, **kwargs)
            assert resp.status_code in (200, 201), (url, resp.text)
        # The budget is spent, whatever the route; a limited write does nothing.
        before = await api.container.db.notes.count_documents({})
        for method, url, kwargs in [*calls, ("GET", "/v1/notes/" + "a" * 24, {})]:
            assert_limited(await api.client.request(method, url, headers=key, **kwargs))
        assert await api.container.db.notes.count_documents({}) == before == 1

        # Per key: the same user's second key and another user's key are untouched.
        for headers in (same_user_other_key, other_user):
            assert (await api.client.get("/v1/me", headers=headers)).status_code == 200
        # Requests with unknown keys are refused before the limiter: they neither consume
        # a real key's budget nor get 429 themselves.
        for _ in range(20):
            resp = await api.client.get("/v1/me", headers={"Authorization": "Bearer an_nope"})
            assert resp.status_code == 401
        for _ in range(4):
            assert (await api.client.get("/v1/me", headers=other_user)).status_code == 200


class StepClock:
    """A clock that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_retry_after_is_honest(make_settings: Any) -> None:
    """At 60/minute one token comes back per second: after waiting Retry-After seconds the
    next request passes, and the one right after it is limited again. The bucket runs on
    the test's clock: on the wall clock, a busy machine serving the two requests slowly
    (over a second apart) refilled a token and made the last check fail at random."""
    async with running_app(make_settings(autonote_rate_limit_per_minute=60)) as api:
        clock = StepClock()
        api.container.users._limiter.clock = clock
        h = await api.new_user()
        loop = asyncio.get_running_loop()
        started, statuses = loop.time(), []
        while len(statuses) < 300 and 429 not in statuses:
            statuses.append((await api.client.get("/v1/me", headers=h)).status_code)
        elapsed = loop.time() - started
        # A bucket of 60, refilled at one per second while the loop ran (slow on a busy box).
        assert statuses[-1] == 429 and set(statuses[:-1]) == {200}
        assert 60 <= len(statuses) - 1 <= 60 + int(elapsed) + 1, (len(statuses), elapsed)
        retry_after = assert_limited(await api.client.get("/v1/me", headers=h))
        assert retry_after == 1
        clock.now += retry_after + 0.05
        assert (await api.client.get("/v1/me", headers=h)).status_code == 200
        assert_limited(await api.client.get("/v1/me", headers=h))


def test_429_is_documented_on_every_user_route(make_settings: Any) -> None:
    from api.app import create_app

    paths = create_app(make_settings()).openapi()["paths"]
    for row in ROWS:
        if row.kind == "user":
            assert "429" in paths[row.path][row.method.lower()]["responses"], row.key
