"""Access control over EVERY route, table-driven (`acl_rows.ROWS` + `acl_rows.PUBLIC`).

For each route: no key, malformed keys, a revoked key and the admin token used as an API key
(user routes), or any user key (admin routes) → 401 with our error body; another user's key
→ 404 for Alice's notes, or a 2xx that holds only Bob's data; the owner (or the admin) gets
the route's success status and, where the route returns note data, sees the marker — so the
absence of the marker everywhere else means something. Every status must be one the OpenAPI
document declares for that operation. Failed attempts must leave no trace.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from fastapi.routing import iter_route_contexts

from api.app import create_app
from tests.conftest import Api, running_app
from tests.security.acl_rows import (
    ADMIN_HEADERS,
    MALFORMED,
    MARKER,
    PUBLIC,
    QUESTION,
    ROWS,
    SECRET_KEY,
    Row,
    World,
    seed_world,
)


def app_routes(app: Any) -> set[str]:
    """`METHOD /path` of every route the app serves (HEAD is Starlette's automatic twin)."""
    found: set[str] = set()
    for route in iter_route_contexts(app.routes):
        for method in route.methods or ():
            if method != "HEAD":
                found.add(f"{method} {route.path}")
    return found


def test_every_route_has_a_row(make_settings: Any) -> None:
    """A new route without a row (or a row for a removed route) fails here."""
    app = create_app(make_settings())
    served = app_routes(app)
    tabled = {row.key for row in ROWS} | set(PUBLIC)
    assert len(tabled) == len(ROWS) + len(PUBLIC), "duplicate rows"
    assert served - tabled == set(), f"routes without an access-control row: {served - tabled}"
    assert tabled - served == set(), f"rows for routes the app does not serve: {tabled - served}"
    documented = {
        f"{method.upper()} {path}" for path, ops in app.openapi()["paths"].items() for method in ops
    }
    assert documented <= served and len(documented) >= len(ROWS)


def documented_statuses(api: Api, row: Row) -> set[int]:
    op = api.app.openapi()["paths"][row.path][row.method.lower()]
    return {int(code) for code in op["responses"]}


def callers(world: World, row: Row) -> dict[str, dict[str, str]]:
    """Everyone who must get 401 on this row."""
    denied: dict[str, dict[str, str]] = {"no key": {}}
    denied.update({f"malformed ({name})": h for name, h in MALFORMED.items()})
    denied["revoked key"] = world.revoked
    if row.kind == "user":
        denied["admin token as api key"] = ADMIN_HEADERS
        denied["owner key, wrong scheme"] = {
            "Authorization": "Token " + world.alice["Authorization"].removeprefix("Bearer ")
        }
    else:
        denied["alice's user key"] = world.alice
        denied["alice's spare key"] = world.spare_key
    return denied


async def call(world: World, row: Row, caller: str, headers: dict[str, str]) -> httpx.Response:
    request = row.build(world, "owner" if caller == "owner" else "other")
    kwargs = dict(request.kwargs)
    return await world.api.client.request(request.method, request.url, headers=headers, **kwargs)


async def snapshot(world: World) -> dict[str, Any]:
    """What a failed attempt could have changed."""
    db = world.api.container.db
    notes = (
        await db.notes.find(
            {}, {"title": 1, "content_md": 1, "tags": 1, "version": 1, "status": 1, "author_id": 1}
        )
        .sort("_id", 1)
        .to_list()
    )
    keys = await db.api_keys.find({}, {"revoked_at": 1}).sort("_id", 1).to_list()
    return {"notes": notes, "keys": keys, "users": await db.users.count_documents({})}


async def test_access_table(make_settings: Any) -> None:
    # The table sends far more wrong admin tokens from one client than the default
    # AUTONOTE_ADMIN_GUESSES_PER_MINUTE (30) allows, on purpose.
    async with running_app(make_settings(autonote_admin_guesses_per_minute=100_000)) as api:
        await _access_table(api)


async def _access_table(api: Api) -> None:
    world = await seed_world(api)
    problems: list[str] = []
    before = await snapshot(world)

    def check(row: Row, who: str, resp: httpx.Response, expected: int) -> None:
        where = f"{row.key} as {who}"
        if resp.status_code != expected:
            problems.append(f"{where}: {resp.status_code} (expected {expected}) {resp.text[:200]}")
        if resp.status_code not in documented_statuses(api, row):
            problems.append(f"{where}: status {resp.status_code} not in the OpenAPI responses")
        if who != "owner" and MARKER in resp.text:
            problems.append(f"{where}: response holds Alice's data: {resp.text[:200]}")
        if resp.status_code == 401:
            body = resp.json()
            if body.get("error") != "unauthorized" or not body.get("detail"):
                problems.append(f"{where}: 401 without the error body: {resp.text[:200]}")
            if row.kind == "user" and resp.headers.get("www-authenticate") != "Bearer":
                problems.append(f"{where}: 401 without WWW-Authenticate: Bearer")

    for row in ROWS:
        for who, headers in callers(world, row).items():
            check(row, who, await call(world, row, who, headers), 401)
        other = world.bob if row.kind == "user" else world.alice
        resp = await call(world, row, "other", other)
        check(row, "another user", resp, row.other)
        if row.kind == "user" and resp.status_code < 300:
            for note_id in (world.secret_id, world.trashed_id):
                if note_id in resp.text:
                    problems.append(f"{row.key} as another user: Alice's note id {note_id}")

    after = await snapshot(world)
    bobs = {n["_id"] for n in after["notes"]} - {n["_id"] for n in before["notes"]}
    assert [n for n in after["notes"] if n["_id"] not in bobs] == before["notes"], (
        "a denied request changed a note"
    )
    bob_author = next(n["author_id"] for n in after["notes"] if str(n["_id"]) == world.bob_note_id)
    assert len(bobs) == 3 and all(
        n["author_id"] == bob_author for n in after["notes"] if n["_id"] in bobs
    ), "Bob's create, upsert and import made Bob's notes, nothing else"
    assert after["keys"] == before["keys"] and after["users"] == before["users"]
    assert (await api.client.get("/v1/me", headers=world.spare_key)).status_code == 200

    for row in ROWS:  # positive controls last: they mutate scratch notes and revoke a key
        headers = world.alice if row.kind == "user" else ADMIN_HEADERS
        resp = await call(world, row, "owner", headers)
        check(row, "owner", resp, row.owner)
        if row.owner_sees_marker and MARKER not in resp.text:
            problems.append(f"{row.key} as owner: the marker is missing (control is void)")
    assert (await api.client.get("/v1/me", headers=world.spare_key)).status_code == 401
    assert not problems, "\n".join(problems)


async def test_public_routes_need_no_key_and_hold_no_notes(api: Api) -> None:
    world = await seed_world(api)
    for key in PUBLIC:
        method, path = key.split(" ", 1)
        for headers in ({}, MALFORMED["unknown key"], world.revoked):
            resp = await api.client.request(method, path, headers=headers)
            assert resp.status_code == 200, (key, headers, resp.text[:200])
            assert MARKER not in resp.text, key


async def test_another_users_targeted_probes_find_nothing(api: Api) -> None:
    """Bob aims at Alice's notes with every lever the API has: her ids in filters, her tag,
    the trash, permanent delete, If-Match, streaming chat, each search mode."""
    world = await seed_world(api)
    alice_ids = [world.secret_id, world.trashed_id]
    only_hers = {"note_ids": alice_ids}
    c = api.client
    probes: list[tuple[str, str, dict[str, Any], int]] = [
        ("GET", "/v1/notes", {"params": {"status": "trashed"}}, 200),
        ("GET", "/v1/notes", {"params": {"tag": MARKER}}, 200),
        ("GET", "/v1/notes", {"params": {"external_id_prefix": SECRET_KEY}}, 200),
        ("GET", "/v1/notes", {"params": {"external_id_prefix": ""}}, 200),
        ("GET", f"/v1/notes/{world.trashed_id}", {}, 404),
        ("GET", f"/v1/notes/{world.trashed_id}/chunks", {}, 404),
        ("POST", f"/v1/notes/{world.trashed_id}/restore", {}, 404),
        ("DELETE", f"/v1/notes/{world.secret_id}", {"params": {"permanent": "true"}}, 404),
        (
            "PATCH",
            f"/v1/notes/{world.secret_id}",
            {"json": {"title": "mine"}, "headers": {"If-Match": '"1"'}},
            404,
        ),
        ("POST", "/v1/chat", {"json": {"message": QUESTION, "filters": only_hers}}, 200),
        ("POST", "/v1/chat", {"json": {"message": QUESTION, "stream": True}}, 200),
        ("POST", "/v1/chat/context", {"json": {"message": MARKER, "filters": only_hers}}, 200),
    ]
    for mode in ("hybrid", "vector", "keyword"):
        for filters in (None, only_hers, {"tags": [MARKER]}):
            body: dict[str, Any] = {"query": MARKER, "mode": mode, "limit": 50}
            if filters:
                body["filters"] = filters
            probes.append(("POST", "/v1/search", {"json": body}, 200))
    for method, url, kwargs, status in probes:
        headers = {**world.bob, **kwargs.pop("headers", {})}
        resp = await c.request(method, url, headers=headers, **kwargs)
        what = f"{method} {url} {json.dumps(kwargs)[:120]}"
        assert resp.status_code == status, (what, resp.text[:300])
        assert MARKER not in resp.text, what
        if status == 200:
            assert not any(i in resp.text for i in alice_ids), what
    # The same searches find Bob's own note: the probes reached a working index.
    hits = (await c.post("/v1/search", json={"query": "Kyoto ledger"}, headers=world.bob)).json()
    assert [r["note_id"] for r in hits["results"]] == [world.bob_note_id]
    mine = (await c.get(f"/v1/notes/{world.secret_id}", headers=world.alice)).json()
    assert mine["version"] == 1 and mine["status"] == "active" and MARKER in mine["content_md"]
