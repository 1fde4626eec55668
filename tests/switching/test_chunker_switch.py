"""A change of chunker (CHUNKING_MAX_TOKENS) on a populated database, the local model both
times: search keeps answering from the previous index at every check during the re-index,
then switches at once to the new chunks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from connectors.embeddings.local import LocalEmbedder
from tests.conftest import running_app
from tests.switching.support import (
    Answers,
    chunk_generations,
    during_switch,
    populate,
    search_all,
    status,
    wait_old_generation_gone,
)

NOTES = 32


def slow_indexing(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Every indexing batch of the local model waits `seconds` first (a query does not)."""
    real = LocalEmbedder.embed

    async def slow(self: LocalEmbedder, texts: list[str], **kwargs: Any) -> Any:
        if not kwargs.get("truncate"):
            await asyncio.sleep(seconds)
        return await real(self, texts, **kwargs)

    monkeypatch.setattr(LocalEmbedder, "embed", slow)


async def test_a_chunker_change_keeps_every_search_mode_answering_then_switches(
    make_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = make_settings(chunking_max_tokens=300)
    async with running_app(before) as api:
        h = await api.new_user()
        await populate(api, h, NOTES)
        baseline, _ = await search_all(api, h)
        old_chunks = await api.container.db.note_chunks.count_documents({})
    assert all(baseline.values())

    slow_indexing(monkeypatch, 0.35)
    after = before.model_copy(
        update={"chunking_max_tokens": 32, "chunking_min_tokens": 8, "autonote_index_workers": 1}
    )
    async with running_app(after) as api:
        seen_done: list[int] = []

        def same_as_before(answers: Answers, bodies: list[Any], now: dict[str, Any]) -> None:
            for key, notes in answers.items():
                assert notes == baseline[key], f"{key} changed during the re-index"
            assert all(b["warning"] is None for b in bodies)
            assert now["serving"]["chunking_version"] != now["configured"]["chunking_version"]
            assert now["serving"]["embedding_model"] == now["configured"]["embedding_model"]
            seen_done.append(now["notes"]["done"])

        rounds = await during_switch(api, h, same_as_before)
        assert rounds >= 8, f"the re-index spanned only {rounds} rounds of searches"
        assert len({d for d in seen_done if 0 < d < NOTES}) >= 3, seen_done

        final = await status(api, h)
        target = final["configured"]["generation"]
        assert final["switching"] is False and final["notes"]["done"] == NOTES
        assert final["cost_so_far_usd"] == 0.0, "the local model costs nothing"
        await wait_old_generation_gone(api.container.db, target)
        answers, bodies = await search_all(api, h)
        assert all(answers.values())
        assert await chunk_generations(api.container.db, bodies) == {target}
        new_chunks = await api.container.db.note_chunks.count_documents({})
        assert new_chunks > old_chunks, "the smaller chunks replaced the old ones"
