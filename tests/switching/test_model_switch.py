"""A change of embedding model on a populated database (the embedded server, the local model,
then the real `openai` client against the local stub): every search mode keeps answering
from the previous index, exactly as before, at every check during the re-embed; the user
then switches at once to the new index and the old chunks go. The status endpoint, the
`autonote index status` command and the start-up log report progress and cost."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from structlog.testing import capture_logs

from api.app import create_app
from tests.conftest import Api, running_app
from tests.helpers import openai_indexing_settings
from tests.switching.support import (
    MODES,
    QUERIES,
    Answers,
    chunk_generations,
    during_switch,
    populate,
    search_all,
    status,
    wait_old_generation_gone,
)

ROOT = Path(__file__).resolve().parents[2]
NOTES = 32


@asynccontextmanager
async def logged_app(settings: Any) -> AsyncIterator[tuple[Api, list[dict[str, Any]]]]:
    """`running_app`, with the log events of its start-up and life captured."""
    app = create_app(settings)  # configures logging: capture after it
    with capture_logs() as logs:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                yield Api(app=app, client=client), logs


def cli_status(env: dict[str, str]) -> dict[str, Any]:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "MONGODB_", "AUTONOTE_", "CHUNKING_", "EMBEDDING_"))
    }
    res = subprocess.run(
        [sys.executable, "-m", "api.cli", "index", "status", "--json"],
        cwd=ROOT,
        env={**base, "PYTHONPATH": str(ROOT), "LOG_LEVEL": "ERROR", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


async def test_a_model_change_keeps_every_search_mode_answering_then_switches(
    make_settings: Any, openai_stub: Any, mongo_url: str, db_name: str
) -> None:
    async with running_app(make_settings()) as api:
        h = await api.new_user()
        await populate(api, h, NOTES)
        baseline, _ = await search_all(api, h)
        local_key = (await status(api, h))["configured"]["embedding_model"]
    assert all(baseline.values()), "every query finds notes before the change"

    openai_stub.set_delay(0.5)  # ~16 s of re-embedding for 32 notes on one worker
    remote = openai_indexing_settings(make_settings, openai_stub.base_url)(
        autonote_index_workers=1, log_level="INFO"
    )
    async with logged_app(remote) as (api, logs):
        change = [e for e in logs if e["event"] == "index.generation_change"]
        assert len(change) == 1, "the start-up states what the change costs, once"
        logged = change[0]
        assert logged["notes"] == NOTES and logged["users"] == 1
        assert logged["estimated_tokens"] > 0 and logged["estimated_seconds"] is not None
        assert logged["price_per_million_tokens_usd"] == 0.02
        assert logged["estimated_cost_usd"] == round(logged["estimated_tokens"] * 0.02 / 1e6, 6)
        assert logged["to_model"] == "text-embedding-3-small@1536"
        assert logged["from_models"] == [local_key]

        seen_done: list[int] = []
        seen_serving: list[str] = []
        cli_seen: list[dict[str, Any]] = []

        async def same_as_before(answers: Answers, bodies: list[Any], now: dict[str, Any]) -> None:
            for key, notes in answers.items():
                assert notes == baseline[key], f"{key} changed during the re-embed"
            assert all(b["warning"] is None for b in bodies)
            assert [b["mode"] for b in bodies] == [m for _ in QUERIES for m in MODES]
            assert now["serving"]["embedding_model"] == local_key
            seen_serving.append(now["serving"]["generation"])
            assert now["configured"]["embedding_model"] == "text-embedding-3-small@1536"
            assert now["notes"]["total"] == NOTES
            seen_done.append(now["notes"]["done"])
            if len(seen_done) == 3:  # the CLI, once, mid-way
                env = {
                    "MONGODB_URL": mongo_url,
                    "MONGODB_DB": db_name,
                    "EMBEDDING_PROVIDER": "openai",
                    "OPENAI_API_KEY": "sk-test",
                    "OPENAI_BASE_URL": openai_stub.base_url,
                }
                cli_seen.append(await asyncio.to_thread(cli_status, env))

        rounds = await during_switch(api, h, same_as_before)
        # Each round is 21 searches; a loaded machine fits fewer rounds in the re-embed.
        assert rounds >= 4, f"the re-embed spanned only {rounds} rounds of searches"
        mid = [d for d in seen_done if 0 < d < NOTES]
        assert len(set(mid)) >= 3, f"progress seen: {seen_done}"
        assert seen_done == sorted(seen_done)

        # The CLI saw the same switch under way, with an estimate and a price.
        (cli,) = cli_seen
        assert cli["switching"] is True and cli["users_switching"] == 1
        assert 0 <= cli["notes"]["done"] < cli["notes"]["total"] == NOTES
        assert cli["price_per_million_tokens_usd"] == 0.02
        assert cli["estimated_tokens_left"] > 0
        assert [u["reads"] for u in cli["users"]] == [seen_serving[0]]
        assert seen_serving[0] != cli["configured"]["generation"]

        # Switched: results now come from the new generation, and the old chunks are gone.
        final = await status(api, h)
        target = final["configured"]["generation"]
        assert final["switching"] is False and final["serving"]["generation"] == target
        assert final["notes"] == {
            "total": NOTES, "done": NOTES, "left": 0, "queued": 0, "failed": 0
        }  # fmt: skip
        assert final["tokens_embedded"] > 0 and final["cost_so_far_usd"] > 0
        await wait_old_generation_gone(api.container.db, target)
        answers, bodies = await search_all(api, h)
        assert all(answers.values()), "every query still finds notes after the switch"
        assert await chunk_generations(api.container.db, bodies) == {target}
        models = await api.container.db.note_chunks.distinct("embedding_model")
        assert models == ["text-embedding-3-small@1536"]
        # The old vectors went to the embedding cache, like other evictions.
        assert await api.container.db.embedding_cache.count_documents({"model": local_key}) > 0
