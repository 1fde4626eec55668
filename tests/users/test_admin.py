"""Admin routes and user creation: the admin token is checked before anything else and its
guessing is throttled; a user is created whole or not at all, once on an empty database,
with a clean name; the default key file is the owner's alone."""

from __future__ import annotations

import asyncio
import os
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from bson import ObjectId
from pymongo import MongoClient
from pymongo.errors import AutoReconnect
from typer.testing import CliRunner

from api.db.client import ensure_indexes
from api.users.service import MAX_TRACKED_KEYS, TokenBucket
from tests.conftest import ADMIN_TOKEN, Api, running_app

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def test_a_user_whose_key_cannot_be_stored_is_not_created(api: Api) -> None:
    async def fail(*_a: Any, **_k: Any) -> None:
        raise AutoReconnect("connection reset")

    api.container.users._repo.insert_key = fail  # type: ignore[method-assign]
    r = await api.client.post("/v1/admin/users", json={"name": "eve"}, headers=ADMIN)
    assert r.status_code == 503 and r.json()["error"] == "database_unavailable"
    assert await api.container.db.users.count_documents({}) == 0


async def test_a_taken_user_name_is_a_conflict_and_makes_no_user(api: Api) -> None:
    r = await api.client.post("/v1/admin/users", json={"name": "Ada"}, headers=ADMIN)
    assert r.status_code == 201
    # The same name after NFKC and case folding: fullwidth letters, another case.
    for name in ("ada", " ADA ", "\uff21da"):
        r = await api.client.post("/v1/admin/users", json={"name": name}, headers=ADMIN)
        assert r.status_code == 409, (name, r.text)
        assert r.json()["error"] == "conflict" and "exists" in r.json()["detail"]
    assert await api.container.db.users.count_documents({}) == 1
    assert await api.container.db.api_keys.count_documents({}) == 1


async def test_users_from_before_unique_names_are_kept_and_keyed(make_settings: Any) -> None:
    """A database with two users of one name (from before names were unique): the start-up
    keys the older, leaves the younger (and its key) as they are, and refuses a third."""
    async with running_app(make_settings()) as api:
        db = api.container.db
        old = [
            {"_id": ObjectId(), "name": n, "created_at": datetime(2025, 1, d, tzinfo=UTC)}
            for n, d in (("Bob", 1), ("bob", 2))
        ]
        await db.users.insert_many(old)
        await ensure_indexes(db)
        keyed = {u["name"]: u.get("name_key") async for u in db.users.find({})}
        assert keyed == {"Bob": "bob", "bob": None}
        r = await api.client.post("/v1/admin/users", json={"name": "BOB"}, headers=ADMIN)
        assert r.status_code == 409
        assert await db.users.count_documents({}) == 2


async def test_two_processes_starting_on_an_empty_database_make_one_default_user(
    make_settings: Any, tmp_path: Path
) -> None:
    settings = [
        make_settings(
            autonote_create_default_user=True,
            autonote_index_workers=0,
            autonote_data_dir=tmp_path / d,
        )
        for d in ("a", "b")
    ]
    for _ in range(3):  # the race is timing-dependent: give it several chances
        async with AsyncExitStack() as stack:
            apis = await asyncio.gather(
                *(stack.enter_async_context(running_app(s)) for s in settings)
            )
            db = apis[0].container.db
            assert await db.users.count_documents({"name": "default"}) == 1
            assert await db.api_keys.count_documents({}) == 1
            user = await db.users.find_one({})
            key_files = [p for p in (tmp_path / "a" / "api_key", tmp_path / "b" / "api_key")]
            written = [p.read_text().strip() for p in key_files if p.exists()]
            assert len(written) == 1  # the process that made the user wrote its key
            r = await apis[0].client.get(
                "/v1/me", headers={"Authorization": f"Bearer {written[0]}"}
            )
            assert r.json()["user_id"] == str(user["_id"])
            await db.users.delete_many({})
            await db.api_keys.delete_many({})
        for p in key_files:
            p.unlink(missing_ok=True)


@pytest.mark.parametrize("planted", ["world_readable_file", "symlink"])
async def test_the_default_key_file_is_always_the_owners_alone(
    make_settings: Any, tmp_path: Path, planted: str
) -> None:
    data = tmp_path / "d"
    data.mkdir()
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not a key\n")
    if planted == "symlink":
        (data / "api_key").symlink_to(elsewhere)
    else:
        (data / "api_key").write_text("stale\n")
        os.chmod(data / "api_key", 0o644)
    settings = make_settings(autonote_create_default_user=True, autonote_data_dir=data)
    async with running_app(settings):
        pass
    key_file = data / "api_key"
    assert not key_file.is_symlink() and key_file.read_text().startswith("an_")
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert elsewhere.read_text() == "not a key\n"  # the link's target was not written
    assert sorted(p.name for p in data.iterdir()) == ["api_key"]  # no temp file left


async def test_wrong_admin_tokens_are_throttled_per_client(make_settings: Any) -> None:
    async with running_app(make_settings(autonote_rate_limit_per_minute=5)) as api:
        clock = [1000.0]
        api.container.users._admin_failures.clock = lambda: clock[0]
        body = {"name": "x"}
        assert (
            await api.client.post("/v1/admin/users", json=body, headers=ADMIN)
        ).status_code == 201
        for i in range(5):
            r = await api.client.post(
                "/v1/admin/users", json=body, headers={"Authorization": f"Bearer guess{i}"}
            )
            assert r.status_code == 401, r.text
        for headers in ({"Authorization": "Bearer guess9"}, ADMIN):
            r = await api.client.post("/v1/admin/users", json=body, headers=headers)
            # Even the right token: a guesser must not learn which guess was right.
            assert r.status_code == 429 and r.json()["error"] == "rate_limited", r.text
            assert int(r.headers["retry-after"]) >= 1
        clock[0] += 12.0  # one wrong token's worth of budget back (5 per minute)
        assert (
            await api.client.post("/v1/admin/users", json={"name": "y"}, headers=ADMIN)
        ).status_code == 201
        assert await api.container.db.users.count_documents({}) == 2
        # The right token never uses up the budget.
        for _ in range(10):
            r = await api.client.post(f"/v1/admin/keys/{'a' * 24}", headers=ADMIN)
            assert r.status_code == 405
        assert (
            await api.client.delete(f"/v1/admin/keys/{'a' * 24}", headers=ADMIN)
        ).status_code == 404


async def test_the_admin_token_is_checked_before_the_request(make_settings: Any) -> None:
    async with running_app(make_settings()) as api:
        for kwargs in (
            {"json": {"nam": 1}},
            {"content": b'{"name":"x"}', "headers": {"content-type": "text/plain"}},
            {"json": {"name": "x"}, "params": {"typo": "1"}},
        ):
            r = await api.client.post("/v1/admin/users", **kwargs)
            assert r.status_code == 401 and r.json()["error"] == "unauthorized", r.text
        # Once the token is right, the request itself is checked.
        r = await api.client.post(
            "/v1/admin/users", json={"name": "x"}, params={"typo": "1"}, headers=ADMIN
        )
        assert r.status_code == 422 and "typo" in r.json()["detail"]
        schema = api.app.openapi()
        for path, method in (
            ("/v1/admin/users", "post"),
            ("/v1/admin/users/{user_id}/keys", "post"),
            ("/v1/admin/keys/{key_id}", "delete"),
        ):
            op = schema["paths"][path][method]
            assert op["security"] == [{"AdminToken": []}], (path, op.get("security"))
            assert "429" in op["responses"]
        assert schema["components"]["securitySchemes"]["AdminToken"]["scheme"] == "bearer"
    async with running_app(make_settings(autonote_admin_token=None)) as api:
        r = await api.client.post("/v1/admin/users", json={})
        assert r.status_code == 403 and r.json()["error"] == "forbidden", r.text
        assert await api.container.db.users.count_documents({}) == 0


BAD_NAMES = ["", "   ", "\x7f", "a\nb", "\u2028", "tab\there", "x" * 101]


async def test_user_names_follow_the_title_rule(api: Api) -> None:
    for name in BAD_NAMES:
        r = await api.client.post("/v1/admin/users", json={"name": name}, headers=ADMIN)
        assert r.status_code == 422 and r.json()["error"] == "validation_error", (name, r.text)
    assert await api.container.db.users.count_documents({}) == 0
    r = await api.client.post("/v1/admin/users", json={"name": "  Ada L.  "}, headers=ADMIN)
    assert r.status_code == 201 and r.json()["name"] == "Ada L."
    assert (await api.container.db.users.find_one({}))["name"] == "Ada L."


def test_the_cli_applies_the_same_name_rule(mongo_url: str, db_name: str, tmp_path: Path) -> None:
    from api.cli import app

    env = {
        "MONGODB_URL": mongo_url,
        "MONGODB_DB": db_name,
        "AUTONOTE_DATA_DIR": str(tmp_path),
        "LOG_LEVEL": "ERROR",
    }
    client: MongoClient = MongoClient(mongo_url)
    try:
        for name in BAD_NAMES:
            res = CliRunner().invoke(app, ["users", "create", name], env=env)
            assert res.exit_code == 2 and "name must" in res.output, (name, res.output)
        assert client[db_name].users.count_documents({}) == 0
        res = CliRunner().invoke(app, ["users", "create", " Grace "], env=env)
        assert res.exit_code == 0, res.output
        assert [u["name"] for u in client[db_name].users.find({})] == ["Grace"]
        res = CliRunner().invoke(app, ["users", "create", "GRACE"], env=env)
        assert res.exit_code == 2 and "a user named 'GRACE' exists" in res.output, res.output
        assert client[db_name].users.count_documents({}) == 1
    finally:
        client.drop_database(db_name)
        client.close()


async def test_admin_guessing_stays_limited_with_the_per_key_limit_off(make_settings: Any) -> None:
    """AUTONOTE_RATE_LIMIT_PER_MINUTE=0 does not turn the wrong-admin-token limit off:
    guesses have their own budget, and once it is spent even the right token gets 429."""
    async with running_app(make_settings(autonote_rate_limit_per_minute=0)) as api:
        statuses = []
        guesses = api.container.settings.autonote_admin_guesses_per_minute
        assert guesses == 30  # the default
        for i in range(guesses + 1):
            r = await api.client.post(
                "/v1/admin/users", json={"name": "x"}, headers={"Authorization": f"Bearer g{i}"}
            )
            statuses.append(r.status_code)
        assert statuses[:-1] == [401] * guesses and statuses[-1] == 429
        r = await api.client.post("/v1/admin/users", json={"name": "x"}, headers=ADMIN)
        assert r.status_code == 429


def test_a_limiter_forgets_keys_whose_budget_is_full_again() -> None:
    """One entry per client address of wrong admin tokens, removed once its budget is full
    again: a client choosing its address (a trusted `X-Forwarded-For: *`) cannot grow the
    table without end."""
    clock = [0.0]
    bucket = TokenBucket(6, clock=lambda: clock[0])
    for i in range(MAX_TRACKED_KEYS):
        bucket.take(f"10.0.{i // 256}.{i % 256}")
    clock[0] += 61.0  # every budget refilled
    bucket.take("fresh")
    assert len(bucket._state) == 1
    bucket.take("fresh")
    assert bucket.empty("fresh") is None  # 4 left of 6
