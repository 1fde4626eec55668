"""`/mcp` (streamable HTTP) driven by the SDK's own client: the tools on real notes (real
embedded database, local model, real chunker), isolation between users, the write
permission, bad arguments answered as tool errors, and the `/v1` authentication and rate
limit in front of it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import ADMIN_TOKEN, Api, running_app
from tests.helpers import wait_indexed
from tests.mcp import scenarios
from tests.mcp.conftest import http_mcp, ok, seed


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_read_tools_on_real_notes(make_settings: Any, mode: str) -> None:
    """Both protocol eras: the initialize handshake and the per-request envelope."""
    async with running_app(make_settings()) as api:
        s = await seed(api)
        async with http_mcp(api, s.alice, mode=mode) as client:
            await scenarios.check_tools_listed(client, writes=False)
            await scenarios.check_read_tools(client, s)
            await scenarios.check_resources(client, s)


async def test_isolation_bad_arguments_and_refused_writes(make_settings: Any) -> None:
    async with running_app(make_settings()) as api:
        s = await seed(api)
        async with http_mcp(api, s.alice) as client:
            await scenarios.check_isolation(client, s)
            await scenarios.check_bad_arguments(client, s)
            await scenarios.check_writes_refused(client, s)


async def test_writes_with_permission(make_settings: Any) -> None:
    async with running_app(make_settings(autonote_mcp_allow_writes=True)) as api:
        s = await seed(api)
        async with http_mcp(api, s.alice) as client:
            await scenarios.check_tools_listed(client, writes=True)
            note_id = await scenarios.check_writes(client, s)
        # The note is Alice's, through the REST API too, and gets indexed and found.
        note = await wait_indexed(api, s.alice, note_id)
        assert note["content_md"].endswith("A new line.") and note["tags"] == ["mcp"]
        r = await api.client.get(f"/v1/notes/{note_id}", headers=s.bob)
        assert r.status_code == 404
        async with http_mcp(api, s.alice) as client:
            found = ok(await client.call_tool("search_notes", {"query": "written by an assistant"}))
            assert found["results"][0]["note_id"] == note_id


async def test_authentication_and_rate_limit(make_settings: Any) -> None:
    """The `/v1` checks: 401 without a valid key (nothing served), 429 with Retry-After
    once the key's per-minute budget is spent."""
    async with running_app(make_settings(autonote_rate_limit_per_minute=3)) as api:
        h = await api.new_user()
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        accept = {"Accept": "application/json, text/event-stream"}
        for headers in ({}, {"Authorization": "Bearer an_wrong"}, {"Authorization": "Basic x"}):
            r = await api.client.post("/mcp", json=ping, headers={**accept, **headers})
            assert r.status_code == 401, r.text
            assert r.json()["error"] == "unauthorized"
            assert r.headers["www-authenticate"] == "Bearer"
        statuses = []
        for _ in range(4):
            r = await api.client.post("/mcp", json=ping, headers={**accept, **h})
            statuses.append(r.status_code)
        assert statuses[:3] != [429] * 3 and statuses[3] == 429
        assert r.json()["error"] == "rate_limited" and int(r.headers["retry-after"]) >= 1


async def test_only_post_is_served(api: Api) -> None:
    """Stateless: no event stream to open with GET (it would never end), no session to
    DELETE; both answer 405 after the key is checked."""
    h = {**(await api.new_user()), "Accept": "application/json, text/event-stream"}
    for method in ("GET", "DELETE", "PUT"):
        r = await api.client.request(method, "/mcp", headers=h)
        assert r.status_code == 405 and r.headers["allow"] == "POST", (method, r.text)
        assert r.json()["error"] == "method_not_allowed"
    assert (await api.client.get("/mcp")).status_code == 401


async def test_revoked_key_is_refused(make_settings: Any) -> None:
    async with running_app(make_settings()) as api:
        s = await seed(api)
        async with http_mcp(api, s.alice) as client:
            assert (await client.list_tools()).tools
        key_id = (await api.client.get("/v1/me", headers=s.alice)).json()["key_id"]
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        r = await api.client.delete(f"/v1/admin/keys/{key_id}", headers=admin)
        assert r.status_code == 204, r.text
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        r = await api.client.post("/mcp", json=ping, headers=s.alice)
        assert r.status_code == 401 and r.json()["detail"] == "invalid or revoked api key"


async def test_mcp_is_not_in_the_openapi_document(api: Api) -> None:
    assert "/mcp" not in (await api.client.get("/openapi.json")).json()["paths"]
