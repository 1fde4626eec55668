"""`updated_after` is a filter on every note, however many a user has: nothing caps the
notes it can match (the Atlas backend filters the chunks' copy of the note's time inside
the search stage; see test_atlas_pipelines.py for that pipeline)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from bson import ObjectId
from pymongo import MongoClient

from api.chunk_store.vectors import to_bson_vector
from api.indexing.records import chunk_document
from api.providers import embedding_model_key
from tests.conftest import running_app

NOTES = 10_050
T0 = datetime(2026, 1, 1, tzinfo=UTC)
AFTER = T0 + timedelta(seconds=49.5)  # notes 50.. (10 000 of them) are newer
MARKED = {*range(0, 50, 5), *range(50, NOTES, 201)}  # 10 older, 50 newer, spread out


def _write_indexed_notes(url: str, db: str, author: ObjectId, api: Any) -> None:
    """Notes as the reconciler leaves them (indexed, current model and chunker), written
    directly: embedding 10 050 notes would take minutes and prove nothing more here."""
    chunker, embedder = api.container.chunker, api.container.embedder
    key, rng = embedding_model_key(embedder), np.random.default_rng(7)
    notes, chunks = [], []
    texts = {w: f"## Field notes\n\nA {w} was seen at the site." for w in ("quokka", "wombat")}
    pieces = {w: chunker.chunk_note(t, "Note") for w, t in texts.items()}
    for i in range(NOTES):
        word = "quokka" if i in MARKED else "wombat"
        note = {
            "_id": ObjectId(),
            "author_id": author,
            "title": "Note",
            "content_md": texts[word],
            "tags": [],
            "status": "active",
            "version": 1,
            "content_version": 1,
            "indexed_version": 1,
            "index_status": "indexed",
            "chunking_strategy": chunker.strategy,
            "chunking_version": chunker.version,
            "embedding_model": key,
            "created_at": T0,
            "updated_at": T0 + timedelta(seconds=i),
            "indexed_at": T0 + timedelta(seconds=i),
        }
        note["chunk_count"] = len(pieces[word])
        notes.append(note)
        for c in pieces[word]:
            vector = rng.standard_normal(embedder.dimensions).astype(np.float32)
            vector = to_bson_vector(vector / np.linalg.norm(vector))
            chunks.append(chunk_document(note, 1, c, vector, model_key=key, now=T0))
    client: MongoClient = MongoClient(url)
    try:
        client[db].notes.insert_many(notes)
        client[db].note_chunks.insert_many(chunks)
    finally:
        client.close()
    api.marked = {str(notes[i]["_id"]) for i in MARKED if notes[i]["updated_at"] > AFTER}


async def test_updated_after_matches_notes_past_ten_thousand(
    make_settings: Any, mongo_url: str, db_name: str
) -> None:
    settings = make_settings()
    async with running_app(settings) as api:
        headers = await api.new_user()
        author = ObjectId((await api.client.get("/v1/me", headers=headers)).json()["user_id"])
        _write_indexed_notes(mongo_url, db_name, author, api)
        expected = api.marked
    assert len(expected) == 50
    async with running_app(settings) as api:  # start-up loads them into the search index
        body = {
            "query": "quokka",
            "mode": "keyword",
            "limit": 50,
            "filters": {"updated_after": AFTER.isoformat().replace("+00:00", "Z")},
        }
        r = await api.client.post("/v1/search", json=body, headers=headers)
        assert r.status_code == 200, r.text
        found = {hit["note_id"] for hit in r.json()["results"]}
    assert found == expected
