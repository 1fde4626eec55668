"""The dry run's pages are bounded by note text as well as by count (a page is chunked at
once), and its list of chunker errors is bounded (not one entry per broken note)."""

from __future__ import annotations

from typing import Any

import pytest
from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

import api.migration.estimate as estimate_module
from api.config import Settings
from api.migration.estimate import Estimate, estimate
from api.migration.repository import MigrationNotes, ReuseLookup
from api.migration.selection import Selection
from api.providers import build_chunker, build_embedder, embedding_model_key


async def test_pages_stop_at_the_text_budget_and_count_the_same(
    settings: Settings, db: AsyncDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    author = ObjectId()
    body = "## Part\n\n" + "Words about harbour logistics and tides. " * 1200  # ~50 K chars
    await db.notes.insert_many(
        [{"title": f"n{i}", "content_md": f"{body}{i}", "author_id": author} for i in range(9)]
    )
    embedder = build_embedder(settings, None)
    chunker = build_chunker(settings, embedder)
    pages: list[int] = []
    real_chunk_batch = estimate_module.chunk_batch

    def counting(chunker: Any, tokenizer: Any, docs: list[dict[str, Any]]) -> Any:
        pages.append(len(docs))
        return real_chunk_batch(chunker, tokenizer, docs)

    monkeypatch.setattr(estimate_module, "chunk_batch", counting)

    async def run(page_chars: int) -> Estimate:
        return await estimate(
            MigrationNotes(db),
            ReuseLookup(db),
            Selection(chunker.version, embedding_model_key(embedder)),
            chunker=chunker,
            tokenizer=embedder.tokenizer,
            provider=embedder.provider,
            model_name=embedder.model,
            batch_size=200,
            page_chars=page_chars,
        )

    whole = await run(10**9)
    assert pages == [9]
    pages.clear()
    bounded = await run(120_000)  # a page ends at the note that reaches the budget
    await embedder.aclose()
    assert pages == [3, 3, 3]
    assert bounded.as_dict() == whole.as_dict() and whole.notes == 9 and whole.chunks > 9


def test_the_list_of_chunker_errors_is_bounded_and_the_count_is_not() -> None:
    result = Estimate(model="m", price_per_million=None)
    for n in range(estimate_module.MAX_LISTED_UNCHUNKABLE + 5):
        result.add_unchunkable(n, "ValueError: broken")
    out = result.as_dict()
    assert len(out["unchunkable"]) == estimate_module.MAX_LISTED_UNCHUNKABLE
    assert out["unchunkable_count"] == result.notes == estimate_module.MAX_LISTED_UNCHUNKABLE + 5
