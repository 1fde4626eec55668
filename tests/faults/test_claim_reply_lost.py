"""A claim applied by the database just before it dies, and retried by the driver
(`retryWrites`) once it is back within the server selection timeout: the restarted server
has forgotten the first attempt and runs the claim again, which matches nothing (the note
is already taken by that first attempt) and returns None instead of raising. The note sat
`indexing` under a lease nobody held for the whole lease (120 s; found by review).

Only the network is faked (a proxy drops the claim's reply); the embedded server is really
SIGKILLed and restarted on its port and data directory."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from bson import ObjectId

from api.db.embedded import EmbeddedMongo
from tests.conftest import running_app
from tests.faults.wire_proxy import ReplyLosingProxy


async def test_a_claim_applied_just_before_a_quick_db_restart_does_not_hold_the_note(
    tmp_path: Path, make_settings: Any
) -> None:
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
    url = await proxy.start()
    settings = make_settings(mongodb_url=url, autonote_index_poll_s=0.1)
    assert settings.autonote_index_lease_s == 120
    try:
        async with running_app(settings) as api:
            h = await api.new_user()
            # The next claim that takes a note: applied, then the server dies before replying.
            proxy.lose_reply_of = lambda req, rep: b"findAndModify" in req and b"claimed_at" in rep
            proxy.on_lost = kill_and_restart
            r = await api.client.post(
                "/v1/notes", json={"title": "t", "content_md": "## A\n\nbody"}, headers=h
            )
            assert r.status_code == 201, r.text
            oid = ObjectId(r.json()["id"])
            started = time.monotonic()
            raw: dict[str, Any] | None = None
            while time.monotonic() - started < 20:
                raw = await api.container.db.notes.find_one({"_id": oid})
                if raw is not None and raw.get("index_status") == "indexed":
                    break
                await asyncio.sleep(0.2)
            assert proxy.lost, "the claim's reply was lost once"
            assert len(servers) == 2, "the server was killed and restarted"
            state = raw and {
                k: raw.get(k) for k in ("index_status", "index_attempts", "lease_token")
            }
            assert raw is not None and raw["index_status"] == "indexed", (
                f"note not indexed 20 s after the restart: {state}, lease until "
                f"{raw and raw.get('lease_expires_at')}"
            )
    finally:
        await proxy.stop()
        servers[-1].stop()
