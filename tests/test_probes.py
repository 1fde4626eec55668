"""Probes and the query-string check: probes answer GET and HEAD whatever the query
string; on `/v1` the caller is authenticated before the query string is checked, and every
`/v1` route checks it."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute
from pymongo.errors import PyMongoError

from api.users.auth import current_user, require_admin
from tests.conftest import ADMIN_TOKEN, Api, running_app


async def test_probes_answer_head_and_ignore_query_strings(api: Api) -> None:
    for path in ("/healthz", "/readyz"):
        assert (await api.client.get(path, params={"ts": "1"})).status_code == 200
        assert (await api.client.head(path)).status_code == 200
    assert (await api.client.get("/metrics", params={"x": "1"})).status_code == 200


async def test_unknown_query_parameters_after_authentication(api: Api) -> None:
    r = await api.client.get("/v1/me", params={"x": "1"})
    assert r.status_code == 401 and r.json()["error"] == "unauthorized"
    h = await api.new_user()
    r = await api.client.get("/v1/notes", params={"tags": "ops"}, headers=h)
    assert r.status_code == 422 and "'tags'" in r.json()["detail"]
    r = await api.client.post(
        "/v1/notes", json={"title": "t", "content_md": "c"}, params={"x": "1"}, headers=h
    )
    assert r.status_code == 422
    assert await api.container.db.notes.count_documents({}) == 0
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    r = await api.client.post(f"/v1/admin/users/{'a' * 24}/keys", params={"x": "1"}, headers=admin)
    assert r.status_code == 422


def test_every_v1_route_authenticates_and_checks_its_query_string(api: Api) -> None:
    """The query-string check runs inside `current_user` and `require_admin`, so a `/v1`
    route with neither would accept any query string silently."""
    guards = {current_user, require_admin}
    for route in api.app.routes:
        if not isinstance(route, APIRoute) or not route.path.startswith("/v1"):
            continue
        calls, stack = set(), [route.dependant]
        while stack:
            node = stack.pop()
            calls.add(node.call)
            stack.extend(node.dependencies)
        assert calls & guards, route.path


@pytest.fixture
def own_database(make_settings: Any, tmp_path: Path) -> Any:
    """Settings with an embedded server of the test's own, which it may stop or pause."""
    return make_settings(
        mongodb_url=None,
        autonote_data_dir=tmp_path / "own",
        mongodb_timeout_ms=500,
        autonote_index_workers=0,
    )


async def test_readyz_in_an_outage_answers_like_every_route(own_database: Any) -> None:
    async with running_app(own_database) as api:
        assert (await api.client.get("/readyz")).status_code == 200
        api.container.embedded.stop()
        r = await api.client.get("/readyz")
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert r.json() == {
            "error": "database_unavailable",
            "detail": "the database did not answer a ping",
        }


async def test_readyz_answers_within_the_database_timeout_when_the_database_stalls(
    own_database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stalled (not dead) database: the ping gives up at MONGODB_TIMEOUT_MS (500 ms
    here) and the probe answers 503, instead of waiting on the socket timeout (15 s). The
    ping's own error pins it: it names the configured `timeoutMS` and is a timeout."""
    async with running_app(own_database) as api:
        assert (await api.client.get("/readyz")).status_code == 200
        errors: list[PyMongoError] = []
        command = api.container.db.command

        async def ping(*args: Any, **kwargs: Any) -> Any:
            try:
                return await command(*args, **kwargs)
            except PyMongoError as exc:
                errors.append(exc)
                raise

        monkeypatch.setattr(api.container.db, "command", ping)
        process = api.container.embedded.process
        process.send_signal(signal.SIGSTOP)
        try:
            # A process running on another core stops only when next scheduled: wait
            # until the kernel reports it stopped, or it may answer one more ping.
            _stopped(process.pid)
            r = await api.client.get("/readyz")
        finally:
            process.send_signal(signal.SIGCONT)
        assert r.status_code == 503, r.text
        (error,) = errors
        assert error.timeout and "timeoutMS: 500.0ms" in str(error), error
        monkeypatch.undo()
        for _ in range(50):  # and ready again once it answers
            if (await api.client.get("/readyz")).status_code == 200:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("not ready again")


def _stopped(pid: int, timeout_s: float = 5.0) -> None:
    """Wait until the kernel reports process `pid` stopped."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while psutil.Process(pid).status() != psutil.STATUS_STOPPED:
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} did not stop")
        time.sleep(0.01)
