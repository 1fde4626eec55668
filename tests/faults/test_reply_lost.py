"""A write the database applies just before it dies, and the driver retries (`retryWrites`)
once it is back within the server selection timeout: the restarted server has forgotten the
first attempt and runs the write again, which matches nothing and returns None instead of
raising.

- A claim: the note must not sit `indexing` under a lease nobody holds for the whole lease.
- A commit: the run reads its own applied commit as refused; it must still evict the old
  version rather than leave the old chunks for the maintenance sweep.

Only the network is faked (a proxy drops the reply); the embedded server is really
SIGKILLed and restarted on its port and data directory."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from bson import ObjectId
from pymongo.errors import PyMongoError

from api.db.embedded import EmbeddedMongo
from tests.conftest import Api, running_app
from tests.faults.wire_proxy import ReplyLosingProxy
from tests.helpers import sectioned_note, wait_evicted, wait_indexed


class ReplyLost:
    """An app on an embedded server behind a proxy, set up so that the next request that
    `lose` picks is applied and the server is SIGKILLed and restarted before it replies."""

    def __init__(self, api: Api, proxy: ReplyLosingProxy, servers: list[EmbeddedMongo]) -> None:
        self.api, self.proxy, self.servers = api, proxy, servers

    def check(self) -> None:
        assert self.proxy.lost, "the reply was lost once"
        assert len(self.servers) == 2, "the server was killed and restarted"


def claim(request: bytes, reply: bytes) -> bool:
    return b"findAndModify" in request and b"claimed_at" in reply


def commit(request: bytes, _reply: bytes) -> bool:
    """A commit of a new version: only its update sets `evict_pending`."""
    return b"findAndModify" in request and b"evict_pending" in request


@asynccontextmanager
async def reply_lost(
    tmp_path: Path,
    make_settings: Any,
    lose: Callable[[bytes, bytes], bool] | None = claim,
    **overrides: Any,
) -> AsyncIterator[ReplyLost]:
    """`lose`: which reply to lose (None: none until the test arms `proxy.lose_reply_of`)."""
    server = EmbeddedMongo(tmp_path / "db")
    server.start()
    port = server.port
    assert port is not None
    servers = [server]

    def kill_and_restart() -> None:
        servers[-1].process.kill()  # type: ignore[union-attr]  # SIGKILL right after the claim
        servers[-1].process.wait()  # type: ignore[union-attr]
        again = EmbeddedMongo(tmp_path / "db", port=port)
        again.start()
        servers.append(again)

    proxy = ReplyLosingProxy("127.0.0.1", port)
    settings = make_settings(mongodb_url=await proxy.start(), **overrides)
    assert settings.autonote_index_lease_s == 120
    try:
        async with running_app(settings) as api:
            proxy.lose_reply_of = lose
            proxy.on_lost = kill_and_restart
            yield ReplyLost(api, proxy, servers)
    finally:
        await proxy.stop()
        servers[-1].stop()


async def test_a_claim_applied_just_before_a_quick_db_restart_does_not_hold_the_note(
    tmp_path: Path, make_settings: Any
) -> None:
    async with reply_lost(tmp_path, make_settings, autonote_index_poll_s=0.1) as lost:
        api = lost.api
        h = await api.new_user()
        r = await api.client.post(
            "/v1/notes", json={"title": "t", "content_md": "## A\n\nbody"}, headers=h
        )
        assert r.status_code == 201, r.text
        oid = ObjectId(r.json()["id"])
        # Within half a lease, a bound no load reaches: a note held under a lease nobody
        # holds waits the whole lease.
        within_s = api.container.settings.autonote_index_lease_s / 2
        started = time.monotonic()
        raw: dict[str, Any] | None = None
        while time.monotonic() - started < within_s:
            raw = await api.container.db.notes.find_one({"_id": oid})
            if raw is not None and raw.get("index_status") == "indexed":
                break
            await asyncio.sleep(0.2)
        lost.check()
        state = raw and {k: raw.get(k) for k in ("index_status", "index_attempts", "lease_token")}
        assert raw is not None and raw["index_status"] == "indexed", (
            f"note not indexed {within_s:.0f} s after the restart: {state}"
        )


async def test_a_retried_claim_with_a_backlog_leaves_no_note_under_a_dead_lease(
    tmp_path: Path, make_settings: Any
) -> None:
    """With another note claimable, the retried claim takes THAT one and returns it: the
    note the first attempt took is handed back, not left `indexing` under this run's
    lease."""
    # No background workers: the runs are driven by hand, so the notes wait as a backlog.
    async with reply_lost(tmp_path, make_settings, autonote_index_workers=0) as lost:
        api = lost.api
        h = await api.new_user()
        ids = []
        for title in ("first", "second"):
            r = await api.client.post(
                "/v1/notes", json={"title": title, "content_md": "## A\n\nbody"}, headers=h
            )
            assert r.status_code == 201, r.text
            ids.append(ObjectId(r.json()["id"]))
        rec = api.container.indexing.reconciler
        outcome = await rec.run_once()
        lost.check()
        assert outcome is not None
        docs = await api.container.db.notes.find({"_id": {"$in": ids}}).to_list()
        state = {str(d["_id"]): (d["index_status"], d.get("lease_token")) for d in docs}
        # The run is over: no note may still be held under a lease no run works under.
        stuck = [d["_id"] for d in docs if d["index_status"] == "indexing"]
        assert stuck == [], f"run_once worked on {outcome.note_id}; all: {state}"
        again = await rec.run_once()  # and the other note is claimable right away
        assert again is not None, "the remaining note could not be claimed"


async def test_both_replies_lost_leaves_no_note_under_a_dead_lease(
    tmp_path: Path, make_settings: Any
) -> None:
    """The driver's retry of the claim loses its reply too (two quick restarts): the first
    attempt took one note, the retry another, and the claim raises. The hand-back gives
    back both."""
    async with reply_lost(tmp_path, make_settings, autonote_index_workers=0) as lost:
        api, proxy = lost.api, lost.proxy
        h = await api.new_user()
        ids = []
        for title in ("first", "second", "third"):
            r = await api.client.post(
                "/v1/notes", json={"title": title, "content_md": "## A\n\nbody"}, headers=h
            )
            assert r.status_code == 201, r.text
            ids.append(ObjectId(r.json()["id"]))
        predicate, restart = proxy.lose_reply_of, proxy.on_lost
        assert predicate is not None and restart is not None

        def restart_and_rearm_once() -> None:
            restart()
            if len(proxy.lost) == 1:  # the driver's retry of the claim loses its reply too
                proxy.lose_reply_of = predicate

        proxy.on_lost = restart_and_rearm_once
        rec = api.container.indexing.reconciler
        with pytest.raises(PyMongoError):
            await rec.run_once()
        assert len(proxy.lost) == 2 and len(lost.servers) == 3
        docs = await api.container.db.notes.find({"_id": {"$in": ids}}).to_list()
        state = {
            str(d["_id"]): (d["index_status"], d.get("index_attempts"), d.get("lease_token"))
            for d in docs
        }
        stuck = [d["_id"] for d in docs if d["index_status"] == "indexing"]
        assert stuck == [], f"held under the failed run's lease: {state}"


async def test_a_commit_applied_just_before_a_quick_db_restart_still_evicts_the_old_version(
    tmp_path: Path, make_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from api.indexing import worker

    monkeypatch.setattr(worker, "MAINTENANCE_EVERY_S", 3600.0)  # only runs may evict
    async with reply_lost(tmp_path, make_settings, None, autonote_index_poll_s=0.1) as lost:
        api, db = lost.api, lost.api.container.db
        h = await api.new_user()
        r = await api.client.post(
            "/v1/notes", json={"title": "t", "content_md": sectioned_note(4, seed=3)}, headers=h
        )
        assert r.status_code == 201, r.text
        oid = ObjectId(r.json()["id"])
        await wait_indexed(api, h, str(oid))
        await wait_evicted(db, oid)
        lost.proxy.lose_reply_of = commit  # version 2's commit
        r = await api.client.patch(
            f"/v1/notes/{oid}", json={"content_md": sectioned_note(4, seed=4)}, headers=h
        )
        assert r.status_code == 200 and r.json()["version"] == 2, r.text
        note = await wait_indexed(api, h, str(oid), timeout_s=30)
        await wait_evicted(db, oid, timeout_s=20)
        lost.check()
        assert note["indexed_version"] == 2
        versions = await db.note_chunks.distinct("note_version", {"note_id": oid})
        assert versions == [2], f"chunk versions left: {versions}"
