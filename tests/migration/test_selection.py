"""What the migration selects and how it enqueues: the pure reasons, then the queries on
the real embedded server (every note state the migration can meet)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bson import Binary, Code, Decimal128, Int64, ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from api.migration.repository import MigrationNotes
from api.migration.selection import Selection, reason
from api.notes.versioning import WHOLE_VERSION, is_whole_version, whole_version

CV, MODEL = "chunker:v2", "model@384"
NOW = datetime(2025, 6, 1, tzinfo=UTC)


def indexed(**over: Any) -> dict[str, Any]:
    """A note indexed at its current version by CV/MODEL, with overrides."""
    doc = {
        "title": "t",
        "content_md": "## A\n\nx",
        "author_id": ObjectId(),
        "tags": [],
        "status": "active",
        "version": 2,
        "created_at": NOW,
        "updated_at": NOW,
        "index_status": "indexed",
        "indexed_version": 2,
        "chunk_count": 1,
        "chunking_version": CV,
        "embedding_model": MODEL,
        "index_attempts": 0,
        "next_attempt_at": NOW,
    }
    doc.update(over)
    return doc


STATES: dict[str, tuple[dict[str, Any], str | None]] = {
    # name: (document, reason when selected / None when not selected)
    "legacy": (
        {
            "title": "t",
            "content_md": "x",
            "author_id": ObjectId(),
            "tags": [],
            "status": "active",
            "created_at": NOW,
        },
        "legacy",
    ),
    "legacy_versioned": (
        {
            "title": "t",
            "content_md": "x",
            "author_id": ObjectId(),
            "tags": [],
            "status": "active",
            "created_at": NOW,
            "version": 4,
        },
        "legacy",
    ),
    "up_to_date": (indexed(), None),
    "empty_note_up_to_date": (indexed(content_md="", chunk_count=0), None),
    "trashed_legacy": (
        {
            "title": "t",
            "content_md": "x",
            "author_id": ObjectId(),
            "status": "trashed",
            "created_at": NOW,
        },
        None,
    ),
    "never_indexed": (
        indexed(index_status="pending", indexed_version=None, chunk_count=0, embedding_model=None),
        "never_indexed",
    ),
    "stale_chunker": (indexed(chunking_version="chunker:v1"), "stale_chunker"),
    "stale_model": (indexed(embedding_model="text-embedding-3-small@1536"), "stale_model"),
    "failed": (indexed(index_status="failed", index_error="boom"), "failed"),
    "behind": (indexed(version=3, index_status="pending"), "behind"),
    "indexed_legacy_version": (indexed(version=None, indexed_version=1), None),
    # MongoDB compares 3.0 equal to 3, but the version must be stored whole.
    "double_version": (indexed(version=3.0, indexed_version=3), "legacy"),
    "string_version": (indexed(version="3", indexed_version=3), "legacy"),
    "zero_version": (indexed(version=0, indexed_version=1), "legacy"),
    "zero_version_indexed_at_zero": (indexed(version=0, indexed_version=0), "legacy"),
}


def test_reason_explains_each_selected_state() -> None:
    for name, (doc, why) in STATES.items():
        if why is not None:
            assert reason(doc, CV, MODEL) == why, name


async def test_selection_query_on_the_server(db: AsyncDatabase) -> None:
    ids = {}
    for name, (doc, _) in STATES.items():
        ids[name] = (await db.notes.insert_one(dict(doc))).inserted_id
    notes = MigrationNotes(db)
    sel = Selection(CV, MODEL)
    want = {ids[n] for n, (_, why) in STATES.items() if why is not None}
    bounds = await notes.id_range(sel)
    assert bounds is not None
    page = await notes.page(sel, after=None, upto=bounds[1], limit=100)
    assert {d["_id"] for d in page} == want
    assert await notes.count(sel) == len(want)

    no_failed = Selection(CV, MODEL, include_failed=False)
    assert await notes.count(no_failed) == len(want) - 1
    # Keyset pages: disjoint, in _id order, together the whole selection.
    first = await notes.page(sel, after=None, upto=bounds[1], limit=3)
    rest = await notes.page(sel, after=first[-1]["_id"], upto=bounds[1], limit=100)
    assert [d["_id"] for d in first + rest] == sorted(want)


async def test_filters_by_author_and_created_at(db: AsyncDatabase) -> None:
    a, b = ObjectId(), ObjectId()
    for i in range(6):
        await db.notes.insert_one(
            {
                "title": f"n{i}",
                "content_md": "x",
                "status": "active",
                "author_id": a if i % 2 else b,
                "created_at": NOW + timedelta(days=i),
            }
        )
    notes = MigrationNotes(db)
    assert await notes.count(Selection(CV, MODEL, authors=(a,))) == 3
    assert await notes.count(Selection(CV, MODEL, since=NOW + timedelta(days=4))) == 2
    assert await notes.count(Selection(CV, MODEL, authors=(a,), since=NOW + timedelta(days=4))) == 1
    # Legacy creation dates as an ISO string or epoch milliseconds are compared as the
    # dates they spell (a plain range would skip them silently).
    late, early = NOW + timedelta(days=10), NOW - timedelta(days=10)
    for created in (
        late.isoformat(),
        int(late.timestamp() * 1000),
        early.isoformat(),
        int(early.timestamp() * 1000),
    ):
        await db.notes.insert_one(
            {"title": "legacy", "content_md": "x", "author_id": a, "created_at": created}
        )
    assert await notes.count(Selection(CV, MODEL, since=NOW + timedelta(days=4))) == 4


async def test_enqueue_fills_only_missing_fields(db: AsyncDatabase) -> None:
    legacy = {
        "title": "t",
        "content_md": "body",
        "author_id": ObjectId(),
        "tags": ["x"],
        "status": "active",
        "created_at": NOW,
    }
    versioned = {**legacy, "version": 7}
    a = (await db.notes.insert_one(dict(legacy))).inserted_id
    b = (await db.notes.insert_one(dict(versioned))).inserted_id
    c = (
        await db.notes.insert_one(
            indexed(index_status="failed", index_attempts=5, index_error="boom", chunk_count=3)
        )
    ).inserted_id
    sel = Selection(CV, MODEL)
    when = NOW + timedelta(days=1)
    assert await MigrationNotes(db).enqueue([a, b, c], sel, when) == 3
    doc_a = await db.notes.find_one({"_id": a})
    assert doc_a["version"] == 1 and doc_a["updated_at"] == NOW
    assert doc_a["index_status"] == "pending" and doc_a["index_attempts"] == 0
    assert doc_a["next_attempt_at"] == when and doc_a["indexed_version"] is None
    assert doc_a["chunk_count"] == 0 and doc_a["content_md"] == "body"
    assert (await db.notes.find_one({"_id": b}))["version"] == 7, "never overwritten"
    doc_c = await db.notes.find_one({"_id": c})
    assert (doc_c["version"], doc_c["chunk_count"], doc_c["chunking_version"]) == (2, 3, CV)
    assert doc_c["index_status"] == "pending" and doc_c["index_attempts"] == 0
    assert doc_c["index_error"] is None, "a failed note gets a fresh attempt budget"


async def test_enqueue_keeps_a_concurrent_edit_and_a_live_lease(db: AsyncDatabase) -> None:
    sel = Selection(CV, MODEL)
    base = {
        "title": "t",
        "content_md": "old",
        "author_id": ObjectId(),
        "tags": [],
        "status": "active",
        "created_at": NOW,
        "version": 1,
    }
    edited = (await db.notes.insert_one(dict(base))).inserted_id
    up_to_date = (await db.notes.insert_one(indexed())).inserted_id
    leased = (
        await db.notes.insert_one(
            indexed(
                index_status="indexing",
                chunking_version="old",
                lease_token="w:1",
                lease_expires_at=NOW + timedelta(minutes=5),
            )
        )
    ).inserted_id
    # The API edits the note after the migration selected it, before it enqueues it.
    await db.notes.update_one(
        {"_id": edited},
        {
            "$set": {
                "content_md": "new",
                "version": 2,
                "index_status": "pending",
                "index_attempts": 0,
                "next_attempt_at": NOW,
                "changed_at": NOW,
            }
        },
    )
    n = await MigrationNotes(db).enqueue([edited, up_to_date, leased], sel, NOW)
    assert n == 1
    doc = await db.notes.find_one({"_id": edited})
    assert (doc["content_md"], doc["version"], doc["index_status"]) == ("new", 2, "pending")
    assert (await db.notes.find_one({"_id": up_to_date}))["index_status"] == "indexed"
    still = await db.notes.find_one({"_id": leased})
    assert (still["index_status"], still["lease_token"]) == ("indexing", "w:1")


async def test_enqueue_makes_a_legacy_version_a_whole_number(db: AsyncDatabase) -> None:
    # A string or fractional `version` never equals the integer `indexed_version`: left as
    # it is, the note would be re-selected by every run.
    cases = {"3": 3, "abc": 1, 4.0: 4, 2.7: 2, -5: 1, 0: 1, None: 1, 9: 9}
    ids = {}
    for raw, _ in cases.items():
        doc = indexed(index_status="failed", indexed_version=None)
        doc["version"] = raw
        ids[raw] = (await db.notes.insert_one(doc)).inserted_id
    assert await MigrationNotes(db).enqueue(list(ids.values()), Selection(CV, MODEL), NOW) == len(
        cases
    )
    for raw, want in cases.items():
        got = (await db.notes.find_one({"_id": ids[raw]}))["version"]
        assert (got, type(got)) == (want, int), raw
        assert whole_version(raw) == want, raw  # what every reader makes of it


# Every kind of value a legacy `version` might hold (BSON types and edge values).
STORED_VERSIONS: list[Any] = [
    3, 0, -5, 2**31 - 1, Int64(5_000_000_000), Int64(3), 2**63 - 1,
    4.0, 2.7, -1.5, 0.5, float(2**31), 3e9, 1e300, float(2**63), -float(2**63),
    float("nan"), float("inf"), float("-inf"),
    Decimal128("3"), Decimal128("5.5"), Decimal128("NaN"), Decimal128("1E+30"), Decimal128("-2"),
    "3", "+3", "-3", " 3", "3 ", "3.0", "007", "3000000000", "9223372036854775807",
    "9223372036854775808", "0x10", "", "３", "1" * 4301, "9" * 30, "0" * 40 + "4",
    10**12 - 1, 10**12, "999999999999", Code("3"), Code("3", {}),
    True, False, None, [3], {"a": 3}, ObjectId(), Binary(b"\x07", 0),
    datetime(2024, 1, 1, tzinfo=UTC),
]  # fmt: skip


async def test_python_and_the_pipeline_read_every_stored_version_alike(
    db: AsyncDatabase,
) -> None:
    docs = [{"_id": i, "version": v} for i, v in enumerate(STORED_VERSIONS)]
    await db.notes.insert_many([*docs, {"_id": len(docs)}])  # and one without `version`
    pipeline = [{"$project": {"whole": WHOLE_VERSION}}, {"$sort": {"_id": 1}}]
    got = {d["_id"]: d["whole"] async for d in await db.notes.aggregate(pipeline)}
    for i, stored in enumerate([*STORED_VERSIONS, None]):
        assert got[i] == whole_version(stored), stored
        assert got[i] >= 1 and is_whole_version(got[i])
    assert [got[i] for i in range(7)] == [3, 1, 1, 2**31 - 1, 5_000_000_000, 3, 1]
