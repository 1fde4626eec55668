"""API keys: required on every /v1 route, stored hashed, revocable; admin token rules."""

from __future__ import annotations

from typing import Any

from tests.conftest import ADMIN_TOKEN, Api, running_app
from tests.helpers import raw_post


async def test_every_v1_route_needs_a_valid_key(api: Api) -> None:
    h = await api.new_user()
    assert (await api.client.get("/v1/me", headers=h)).status_code == 200
    for headers in (
        {},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer an_not-a-real-key"},
        {"Authorization": "an_x"},
    ):
        for method, url in (
            ("GET", "/v1/notes"),
            ("POST", "/v1/notes"),
            ("GET", "/v1/me"),
            ("GET", "/v1/notes/" + "a" * 24),
        ):
            resp = await api.client.request(method, url, headers=headers, json={})
            assert resp.status_code == 401, (headers, method, url)
            assert resp.json()["error"] == "unauthorized"
            assert resp.headers.get("www-authenticate") == "Bearer"


async def test_keys_are_stored_hashed_and_revocable(api: Api) -> None:
    resp = await api.client.post(
        "/v1/admin/users",
        json={"name": "carol"},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    created = resp.json()
    key = created["api_key"]
    stored = await api.container.db.api_keys.find_one({})
    assert key not in str(stored) and stored["key_hash"] != key
    h = {"Authorization": f"Bearer {key}"}
    me = (await api.client.get("/v1/me", headers=h)).json()
    assert me == {"user_id": created["user_id"], "name": "carol", "key_id": created["key_id"]}
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    second = (
        await api.client.post(f"/v1/admin/users/{created['user_id']}/keys", headers=admin)
    ).json()
    r = await api.client.delete(f"/v1/admin/keys/{created['key_id']}", headers=admin)
    assert r.status_code == 204
    assert (await api.client.get("/v1/me", headers=h)).status_code == 401
    h2 = {"Authorization": f"Bearer {second['api_key']}"}
    assert (await api.client.get("/v1/me", headers=h2)).status_code == 200
    again = await api.client.delete(f"/v1/admin/keys/{created['key_id']}", headers=admin)
    assert again.status_code == 404


async def test_admin_routes_need_the_admin_token(api: Api) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        r = await api.client.post("/v1/admin/users", json={"name": "x"}, headers=headers)
        assert r.status_code == 401
    user_key = await api.new_user()
    r = await api.client.post("/v1/admin/users", json={"name": "x"}, headers=user_key)
    assert r.status_code == 401
    assert await api.container.db.users.count_documents({}) == 1


async def test_admin_api_disabled_without_token(make_settings: Any) -> None:
    async with running_app(make_settings(autonote_admin_token=None)) as api:
        r = await api.client.post(
            "/v1/admin/users", json={"name": "x"}, headers={"Authorization": "Bearer anything"}
        )
        assert r.status_code == 403 and "AUTONOTE_ADMIN_TOKEN" in r.json()["detail"]


async def test_rate_limit_answers_429_with_retry_after(make_settings: Any) -> None:
    async with running_app(make_settings(autonote_rate_limit_per_minute=5)) as api:
        h = await api.new_user()
        codes = [(await api.client.get("/v1/me", headers=h)).status_code for _ in range(8)]
        assert codes[:5] == [200] * 5 and codes[5:] == [429] * 3
        r = await api.client.get("/v1/me", headers=h)
        assert r.json()["error"] == "rate_limited" and int(r.headers["retry-after"]) >= 1
        other = await api.new_user("other")
        assert (await api.client.get("/v1/me", headers=other)).status_code == 200


async def test_default_user_created_once(make_settings: Any, tmp_path) -> None:
    settings = make_settings(autonote_create_default_user=True, autonote_data_dir=tmp_path / "d")
    async with running_app(settings) as api:
        key = (tmp_path / "d" / "api_key").read_text().strip()
        assert key.startswith("an_")
        assert (tmp_path / "d" / "api_key").stat().st_mode & 0o777 == 0o600
        r = await api.client.get("/v1/me", headers={"Authorization": f"Bearer {key}"})
        assert r.json()["name"] == "default"
    async with running_app(settings) as api:
        assert await api.container.db.users.count_documents({}) == 1
        assert (tmp_path / "d" / "api_key").read_text().strip() == key


async def _raw_post(api: Api, path: str, headers: dict[str, str], body: bytes) -> tuple[int, int]:
    """POST straight to the ASGI app: (status, how many times the app read the body)."""
    response = await raw_post(api.app, path, headers, body)
    return response.status, response.reads


async def test_who_asks_is_checked_before_the_body_is_read(api: Api) -> None:
    """FastAPI parses a JSON body before any dependency, so an anonymous request carrying 8
    MB of JSON numbers would cost event-loop time before its 401. Nothing reads the body of
    a request whose key or admin token is wrong, and a body that is not JSON gets the
    401."""
    h = await api.new_user()
    numbers = b"[" + b"1," * 50_000 + b"1]"
    for path, headers in (
        ("/v1/search", {}),
        ("/v1/chat", {"Authorization": "Bearer an_not-a-real-key"}),
        ("/v1/notes", {"Authorization": "Basic abc"}),
        ("/v1/admin/users", {"Authorization": "Bearer wrong"}),
    ):
        assert await _raw_post(api, path, headers, numbers) == (401, 0), path
        assert await _raw_post(api, path, headers, b"{not json") == (401, 0), path
    # With a valid key the body is read and checked as before.
    assert (await _raw_post(api, "/v1/search", h, b"{not json"))[0] == 400
    r = await api.client.post("/v1/search", json={"query": "x"}, headers=h)
    assert r.status_code == 200, r.text


async def test_a_database_outage_is_one_503_before_the_body_is_read(api: Api) -> None:
    """With the database unavailable the middleware answers 503 itself: the dependency
    does not ask the database again (two server-selection timeouts) and the body is not
    parsed. The key is asked for once and the 503 comes at once."""
    from pymongo.errors import ServerSelectionTimeoutError

    h = await api.new_user()
    calls: list[str | None] = []

    async def down(authorization: str | None) -> Any:
        calls.append(authorization)
        raise ServerSelectionTimeoutError("no servers found")

    api.container.users.authenticate = down  # the database stops answering
    assert await _raw_post(api, "/v1/search", h, b"[" + b"1," * 1000 + b"1]") == (503, 0)
    assert len(calls) == 1
    r = await api.client.get("/v1/me", headers=h)
    assert r.status_code == 503 and r.json()["error"] == "database_unavailable"
    assert r.headers["retry-after"] == "1" and len(calls) == 2
