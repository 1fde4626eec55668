"""Aggregation pipelines for the `atlas` search backend (pure builders, no I/O).

`author_id` is always in the search stage's own filter (a pre-filter), and so are the user
filters (`updated_after` on the chunks' copy of the note's `updated_at`); an empty
`note_ids` or `tags` list raises `EmptyFilterError`. A `$lookup` after the search stage
keeps only chunks of their note's `indexed_version` (`current_version_guard`). See
docs/search.md (Atlas).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

from bson import ObjectId

from api.notes.stored import STATUS_QUERY

MAX_NUM_CANDIDATES = 10_000
CANDIDATE_MULTIPLIER = 20
DEFAULT_GUARD_MARGIN = 10
MAX_QUERY_CHARS = 4096
EMBEDDING_PATH = "embedding"
TEXT_PATHS = ("section_path", "metadata.aliases", "content_md")
# The note's `updated_at`, denormalised onto its chunks so `updated_after` is a pre-filter.
UPDATED_PATH = "note_updated_at"

# Every chunk field search needs, and nothing else: an inclusion projection, so the
# `embedding` (the largest field by far) is never sent back.
CHUNK_FIELDS = (
    "_id",
    "note_id",
    "author_id",
    "note_version",
    "chunk_index",
    "heading_path",
    "section_index",
    "section_path",
    "content_md",
    "start_offset",
    "end_offset",
    "tags",
    "chunk_type",
)

Pipeline = list[dict[str, Any]]
T = TypeVar("T")


class EmptyFilterError(ValueError):
    """A filter list is empty, so nothing can match: skip the query."""


def num_candidates_for(limit: int, requested: int | None = None) -> int:
    """`numCandidates` for `limit`: `requested` if given, else 20 × limit; never below
    `limit`, never above 10 000."""
    if limit < 1 or limit > MAX_NUM_CANDIDATES:
        raise ValueError(f"limit must be between 1 and {MAX_NUM_CANDIDATES}")
    wanted = requested if requested is not None else CANDIDATE_MULTIPLIER * limit
    return min(MAX_NUM_CANDIDATES, max(limit, wanted))


def vector_search_filter(
    author_id: ObjectId,
    *,
    note_ids: Sequence[ObjectId] | None = None,
    tags: Sequence[str] | None = None,
    updated_after: datetime | None = None,
) -> dict[str, Any]:
    """The `$vectorSearch.filter`: author always; note ids, tags (ANY-of) and the note's
    `updated_at` (copied onto its chunks as `note_updated_at`) when given."""
    _require_object_id(author_id)
    clauses: list[dict[str, Any]] = [{"author_id": {"$eq": author_id}}]
    if note_ids is not None:
        clauses.append({"note_id": {"$in": _object_ids(note_ids, "note_ids")}})
    if tags is not None:
        clauses.append({"tags": {"$in": _non_empty(list(tags), "tags")}})
    if updated_after is not None:
        clauses.append({UPDATED_PATH: {"$gt": updated_after}})
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def vector_search_stage(
    index_name: str,
    query_vector: Sequence[float],
    author_id: ObjectId,
    *,
    limit: int,
    num_candidates: int | None = None,
    note_ids: Sequence[ObjectId] | None = None,
    tags: Sequence[str] | None = None,
    updated_after: datetime | None = None,
) -> dict[str, Any]:
    """The `$vectorSearch` stage alone."""
    vector = [float(x) for x in query_vector]
    if not vector:
        raise ValueError("query_vector is empty")
    return {
        "$vectorSearch": {
            "index": index_name,
            "path": EMBEDDING_PATH,
            "queryVector": vector,
            "numCandidates": num_candidates_for(limit, num_candidates),
            "limit": limit,
            "filter": vector_search_filter(
                author_id, note_ids=note_ids, tags=tags, updated_after=updated_after
            ),
        }
    }


def search_stage(
    index_name: str,
    query: str,
    author_id: ObjectId,
    *,
    note_ids: Sequence[ObjectId] | None = None,
    tags: Sequence[str] | None = None,
    updated_after: datetime | None = None,
) -> dict[str, Any]:
    """The `$search` stage: `text` must-clause over breadcrumb and content, filters in
    `compound.filter` (they restrict without scoring)."""
    _require_object_id(author_id)
    text = query.strip()[:MAX_QUERY_CHARS]
    if not text:
        raise ValueError("query is empty")
    filters: list[dict[str, Any]] = [{"equals": {"path": "author_id", "value": author_id}}]
    if note_ids is not None:
        filters.append({"in": {"path": "note_id", "value": _object_ids(note_ids, "note_ids")}})
    if tags is not None:
        filters.append({"in": {"path": "tags", "value": _non_empty(list(tags), "tags")}})
    if updated_after is not None:
        filters.append({"range": {"path": UPDATED_PATH, "gt": updated_after}})
    return {
        "$search": {
            "index": index_name,
            "compound": {
                # `text` analyses the query as plain words (no query-string syntax).
                "must": [{"text": {"query": text, "path": list(TEXT_PATHS)}}],
                "filter": filters,
            },
        }
    }


def chunk_projection(score_meta: str) -> dict[str, Any]:
    """`$project` of the chunk fields plus `score` from `{"$meta": score_meta}`."""
    projection: dict[str, Any] = dict.fromkeys(CHUNK_FIELDS, 1)
    projection["score"] = {"$meta": score_meta}
    return {"$project": projection}


def current_version_guard(notes_collection: str = "notes") -> Pipeline:
    """Stages keeping only chunks of their note's `indexed_version`, or of the version it
    replaced while that stays searchable (`previous_indexed_version`, until the search
    index has caught up); same author, note not trashed. They run after the search stage,
    so they may leave fewer than `limit` results; the pipelines fetch `guard_margin` extra
    to cover that. Callers keep each note's newest version (`backends.newest_versions`)."""
    return [
        {
            "$lookup": {
                "from": notes_collection,
                "localField": "note_id",
                "foreignField": "_id",
                "let": {"version": "$note_version", "author": "$author_id"},
                "pipeline": [
                    {
                        "$match": {
                            "$expr": {
                                "$and": [
                                    {
                                        "$in": [
                                            "$$version",
                                            [
                                                "$indexed_version",
                                                {"$ifNull": ["$previous_indexed_version", None]},
                                            ],
                                        ]
                                    },
                                    {"$eq": ["$author_id", "$$author"]},
                                    # Active as `note_status` reads it.
                                    {"$in": [{"$ifNull": ["$status", None]}, ["active", None]]},
                                ]
                            }
                        }
                    },
                    {"$project": {"_id": 1}},
                ],
                "as": "_current_note",
            }
        },
        {"$match": {"_current_note": {"$ne": []}}},
        {"$unset": "_current_note"},
    ]


def vector_search_pipeline(
    index_name: str,
    query_vector: Sequence[float],
    author_id: ObjectId,
    *,
    limit: int,
    num_candidates: int | None = None,
    note_ids: Sequence[ObjectId] | None = None,
    tags: Sequence[str] | None = None,
    updated_after: datetime | None = None,
    version_guard: bool = True,
    guard_margin: int = DEFAULT_GUARD_MARGIN,
    notes_collection: str = "notes",
) -> Pipeline:
    """`$vectorSearch` (first stage, pre-filtered) → projection with `score` (cosine-based
    `vectorSearchScore`, no embedding) → version guard → `$limit`."""
    search_limit = limit + guard_margin if version_guard else limit
    pipeline: Pipeline = [
        vector_search_stage(
            index_name,
            query_vector,
            author_id,
            limit=min(search_limit, MAX_NUM_CANDIDATES),
            num_candidates=num_candidates,
            note_ids=note_ids,
            tags=tags,
            updated_after=updated_after,
        ),
        chunk_projection("vectorSearchScore"),
    ]
    if version_guard:
        pipeline += [*current_version_guard(notes_collection), {"$limit": limit}]
    return pipeline


def text_search_pipeline(
    index_name: str,
    query: str,
    author_id: ObjectId,
    *,
    limit: int,
    note_ids: Sequence[ObjectId] | None = None,
    tags: Sequence[str] | None = None,
    updated_after: datetime | None = None,
    version_guard: bool = True,
    guard_margin: int = DEFAULT_GUARD_MARGIN,
    notes_collection: str = "notes",
) -> Pipeline:
    """`$search` (first stage, pre-filtered) → `$limit` → projection with `score`
    (`searchScore`) → version guard → `$limit`."""
    if limit < 1:
        raise ValueError("limit must be >= 1")
    pipeline: Pipeline = [
        search_stage(
            index_name, query, author_id, note_ids=note_ids, tags=tags, updated_after=updated_after
        ),
        {"$limit": limit + guard_margin if version_guard else limit},
        chunk_projection("searchScore"),
    ]
    if version_guard:
        pipeline += [*current_version_guard(notes_collection), {"$limit": limit}]
    return pipeline


def notes_filter_query(
    author_id: ObjectId,
    *,
    updated_after: datetime | None = None,
    tags: Sequence[str] | None = None,
    note_ids: Sequence[ObjectId] | None = None,
) -> dict[str, Any]:
    """A `notes.find` filter for the author's active notes passing the user filters (the
    note-level search of CHUNKING_ENABLED=false)."""
    _require_object_id(author_id)
    query: dict[str, Any] = {"author_id": author_id, "status": STATUS_QUERY["active"]}
    if updated_after is not None:
        query["updated_at"] = {"$gt": updated_after}
    if tags is not None:
        query["tags"] = {"$in": list(tags)}
    if note_ids is not None:
        query["_id"] = {"$in": list(note_ids)}
    return query


def _require_object_id(author_id: object) -> None:
    # A str would silently match nothing (chunks store ObjectIds): fail loudly instead.
    if not isinstance(author_id, ObjectId):
        raise TypeError("author_id must be a bson.ObjectId")


def _object_ids(values: Sequence[ObjectId], name: str) -> list[ObjectId]:
    out = _non_empty(list(values), name)
    if not all(isinstance(v, ObjectId) for v in out):
        raise TypeError(f"{name} must be bson.ObjectId values")
    return out


def _non_empty(values: list[T], name: str) -> list[T]:
    if not values:
        raise EmptyFilterError(f"empty {name} filter matches nothing")
    return values
