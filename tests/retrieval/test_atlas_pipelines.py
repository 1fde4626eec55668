"""Atlas pipeline builders, checked against the documented syntax; the version guard is also
run for real on the embedded database (it has `$lookup`, not `$vectorSearch`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from bson import ObjectId
from pymongo import MongoClient

from api.retrieval.atlas_pipelines import (
    CHUNK_FIELDS,
    MAX_NUM_CANDIDATES,
    EmptyFilterError,
    current_version_guard,
    notes_filter_query,
    num_candidates_for,
    text_search_pipeline,
    vector_search_filter,
    vector_search_pipeline,
)
from api.retrieval.types import ChunkHit

AUTHOR = ObjectId()
NOTE_A, NOTE_B = ObjectId(), ObjectId()
VEC = [0.1, 0.2, 0.3]


def _stage_names(pipeline: list[dict[str, Any]]) -> list[str]:
    return [next(iter(stage)) for stage in pipeline]


def _assert_no_embedding(projection: dict[str, Any]) -> None:
    assert "embedding" not in projection
    # An inclusion projection: every value but the score is 1, so nothing unlisted is sent.
    assert all(v == 1 for k, v in projection.items() if k != "score")


@pytest.mark.parametrize(
    ("limit", "requested", "expected"),
    [
        (1, None, 20),
        (5, None, 100),
        (10, None, 200),
        (500, None, 10_000),
        (501, None, 10_000),
        (10_000, None, 10_000),
        (10, 50, 50),
        (10, 3, 10),  # never below limit
        (10, 50_000, 10_000),  # never above the cap
    ],
)
def test_num_candidates_bounds(limit: int, requested: int | None, expected: int) -> None:
    assert num_candidates_for(limit, requested) == expected


@pytest.mark.parametrize("limit", [0, -1, MAX_NUM_CANDIDATES + 1])
def test_num_candidates_rejects_bad_limits(limit: int) -> None:
    with pytest.raises(ValueError):
        num_candidates_for(limit)


def test_vector_filter_shapes() -> None:
    assert vector_search_filter(AUTHOR) == {"author_id": {"$eq": AUTHOR}}
    assert vector_search_filter(AUTHOR, note_ids=[NOTE_A, NOTE_B], tags=["x", "y"]) == {
        "$and": [
            {"author_id": {"$eq": AUTHOR}},
            {"note_id": {"$in": [NOTE_A, NOTE_B]}},
            {"tags": {"$in": ["x", "y"]}},
        ]
    }
    with pytest.raises(TypeError):
        vector_search_filter(str(AUTHOR))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        vector_search_filter(AUTHOR, note_ids=[str(NOTE_A)])  # type: ignore[list-item]
    with pytest.raises(EmptyFilterError):
        vector_search_filter(AUTHOR, tags=[])
    with pytest.raises(EmptyFilterError):
        vector_search_filter(AUTHOR, note_ids=[])


def test_updated_after_is_a_pre_filter_on_the_chunks() -> None:
    """`updated_after` filters the chunks' copy of their note's `updated_at` inside the
    search stage: no list of note ids, so no cap on how many notes it can match."""
    after = datetime(2026, 1, 31, tzinfo=UTC)
    assert vector_search_filter(AUTHOR, updated_after=after) == {
        "$and": [{"author_id": {"$eq": AUTHOR}}, {"note_updated_at": {"$gt": after}}]
    }
    vector = vector_search_pipeline("v", VEC, AUTHOR, limit=5, updated_after=after)
    assert {"note_updated_at": {"$gt": after}} in vector[0]["$vectorSearch"]["filter"]["$and"]
    text = text_search_pipeline("t", "q", AUTHOR, limit=5, updated_after=after)
    assert text[0]["$search"]["compound"]["filter"] == [
        {"equals": {"path": "author_id", "value": AUTHOR}},
        {"range": {"path": "note_updated_at", "gt": after}},
    ]


def test_vector_search_pipeline_without_guard() -> None:
    pipeline = vector_search_pipeline(
        "chunks_vec", VEC, AUTHOR, limit=10, version_guard=False, tags=["t"]
    )
    assert _stage_names(pipeline) == ["$vectorSearch", "$project"]
    stage = pipeline[0]["$vectorSearch"]
    assert stage == {
        "index": "chunks_vec",
        "path": "embedding",
        "queryVector": VEC,
        "numCandidates": 200,
        "limit": 10,
        "filter": {"$and": [{"author_id": {"$eq": AUTHOR}}, {"tags": {"$in": ["t"]}}]},
    }
    projection = pipeline[1]["$project"]
    _assert_no_embedding(projection)
    assert projection["score"] == {"$meta": "vectorSearchScore"}
    assert set(projection) == {*CHUNK_FIELDS, "score"}


def test_vector_search_pipeline_with_guard_overfetches_then_limits() -> None:
    pipeline = vector_search_pipeline("v", VEC, AUTHOR, limit=5, guard_margin=7)
    assert _stage_names(pipeline) == [
        "$vectorSearch",
        "$project",
        "$lookup",
        "$match",
        "$unset",
        "$limit",
    ]
    stage = pipeline[0]["$vectorSearch"]
    assert stage["limit"] == 12
    assert stage["numCandidates"] == 240  # 20 × the stage's own limit
    assert pipeline[-1] == {"$limit": 5}
    lookup = pipeline[2]["$lookup"]
    assert lookup["from"] == "notes" and lookup["localField"] == "note_id"
    assert lookup["foreignField"] == "_id"


def test_text_search_pipeline() -> None:
    pipeline = text_search_pipeline(
        "chunks_text", '  NEAR("a" b) *  ', AUTHOR, limit=8, note_ids=[NOTE_A], tags=["x"]
    )
    assert _stage_names(pipeline)[:3] == ["$search", "$limit", "$project"]
    search = pipeline[0]["$search"]
    assert search["index"] == "chunks_text"
    compound = search["compound"]
    assert compound["must"] == [
        {
            "text": {
                "query": 'NEAR("a" b) *',
                "path": ["section_path", "metadata.aliases", "content_md"],
            }
        }
    ]
    assert compound["filter"] == [
        {"equals": {"path": "author_id", "value": AUTHOR}},
        {"in": {"path": "note_id", "value": [NOTE_A]}},
        {"in": {"path": "tags", "value": ["x"]}},
    ]
    assert isinstance(compound["filter"][0]["equals"]["value"], ObjectId)
    projection = pipeline[2]["$project"]
    _assert_no_embedding(projection)
    assert projection["score"] == {"$meta": "searchScore"}
    assert pipeline[-1] == {"$limit": 8}
    with pytest.raises(ValueError):
        text_search_pipeline("t", "   ", AUTHOR, limit=5)
    with pytest.raises(EmptyFilterError):
        text_search_pipeline("t", "q", AUTHOR, limit=5, tags=[])


def test_notes_filter_query() -> None:
    after = datetime(2024, 5, 1, tzinfo=UTC)
    assert notes_filter_query(AUTHOR, updated_after=after, tags=["a"]) == {
        "author_id": AUTHOR,
        "status": {"$in": ["active", None]},
        "updated_at": {"$gt": after},
        "tags": {"$in": ["a"]},
    }


def test_version_guard_runs_on_a_real_server(mongo_url: str, db_name: str) -> None:
    client: MongoClient = MongoClient(mongo_url, serverSelectionTimeoutMS=5000)
    try:
        db = client[db_name]
        other_author = ObjectId()
        trashed = ObjectId()
        db.notes.insert_many(
            [
                {"_id": NOTE_A, "author_id": AUTHOR, "indexed_version": 2, "status": "active"},
                {"_id": NOTE_B, "author_id": AUTHOR, "indexed_version": 1, "status": "active"},
                {"_id": trashed, "author_id": AUTHOR, "indexed_version": 1, "status": "trashed"},
            ]
        )

        def doc(note_id: ObjectId, version: int, index: int, author: ObjectId = AUTHOR) -> dict:
            return {
                "note_id": note_id,
                "author_id": author,
                "note_version": version,
                "chunk_index": index,
                "heading_path": ["T"],
                "section_path": "T",
                "content_md": f"v{version} c{index}",
                "start_offset": 0,
                "end_offset": 5,
                "tags": [],
                "chunk_type": "text",
                "embedding": [0.0, 1.0],
            }

        db.note_chunks.insert_many(
            [
                doc(NOTE_A, 1, 0),  # stale: A is indexed at version 2
                doc(NOTE_A, 2, 0),
                doc(NOTE_A, 2, 1),
                doc(NOTE_B, 1, 0),
                doc(NOTE_B, 2, 0),  # in flight: B's version 2 is not indexed yet
                doc(trashed, 1, 0),
                doc(NOTE_A, 2, 9, author=other_author),  # forged author on a chunk
            ]
        )
        # Stand-in for the search stage (this server has none), then the real guard.
        pipeline = [
            {"$match": {}},
            {"$sort": {"note_id": 1, "note_version": 1, "chunk_index": 1}},
            {"$project": {**dict.fromkeys(CHUNK_FIELDS, 1), "score": {"$literal": 0.5}}},
            *current_version_guard(),
        ]
        docs = list(db.note_chunks.aggregate(pipeline))
        got = sorted((d["note_id"], d["note_version"], d["chunk_index"]) for d in docs)
        assert got == sorted([(NOTE_A, 2, 0), (NOTE_A, 2, 1), (NOTE_B, 1, 0)])
        assert all("_current_note" not in d and "embedding" not in d for d in docs)
        hit = ChunkHit.from_document(docs[0])
        assert hit.note_id in {str(NOTE_A), str(NOTE_B)} and hit.score == 0.5
    finally:
        client.drop_database(db_name)
        client.close()
