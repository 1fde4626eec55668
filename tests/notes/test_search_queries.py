"""`NotesSearchQueries.text_windows` on the real embedded server: the server cuts the
windows (code points, as Python slices), scoped to the author's active notes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from api.db.client import create_client
from api.notes.repository import NotesSearchQueries

TEXT = "## Ünïcode 😀\n\n" + "".join(f"line {n} — naïve café 🎉 {n * 7}\n" for n in range(3000))


@pytest.fixture
async def db(make_settings: Any) -> AsyncIterator[AsyncDatabase]:
    settings = make_settings()
    client = create_client(str(settings.mongodb_url))
    try:
        yield client[settings.mongodb_db]
    finally:
        await client.close()


async def test_windows_are_python_slices_of_the_authors_active_notes(db: AsyncDatabase) -> None:
    alice, bob = ObjectId(), ObjectId()
    mine, trashed, theirs, numeric = ObjectId(), ObjectId(), ObjectId(), ObjectId()
    base = {"version": 3, "content_version": 2}
    await db.notes.insert_many(
        [
            {"_id": mine, "author_id": alice, "status": "active", "content_md": TEXT, **base},
            {"_id": trashed, "author_id": alice, "status": "trashed", "content_md": TEXT},
            {"_id": theirs, "author_id": bob, "status": "active", "content_md": TEXT},
            {"_id": numeric, "author_id": alice, "status": "active", "content_md": 12345},
        ]
    )
    spans = [(0, 14), (15, 400), (50_000, 50_300), (len(TEXT) - 5, len(TEXT) + 100)]
    queries = NotesSearchQueries(db)
    docs = await queries.text_windows(
        alice, {mine: spans, trashed: spans, theirs: spans, numeric: [(0, 3)]}
    )
    by_id = {d["_id"]: d for d in docs}
    assert set(by_id) == {mine, numeric}  # never another author's, never a trashed one
    assert by_id[mine]["windows"] == [TEXT[a:b] for a, b in spans]
    assert (by_id[mine]["version"], by_id[mine]["content_version"]) == (3, 2)
    assert "content_md" not in by_id[mine]
    assert by_id[numeric]["windows"] is None  # not text: grouping falls back on the chunks
    assert await queries.text_windows(alice, {}) == []
