"""`api.notes.stored`: legacy field shapes read into the API's shape (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

from bson import Binary, Decimal128, Int64, ObjectId

from api.notes.stored import (
    EPOCH,
    as_datetime,
    note_created_at,
    note_status,
    note_tags,
    note_title,
    note_updated_at,
    unindexable_reason,
)


def test_text_fields() -> None:
    assert note_title({}) == "" and note_title({"title": None}) == ""
    assert note_title({"title": 7}) == "7" and note_title({"title": 2.5}) == "2.5"
    assert note_title({"title": True}) == "" and note_title({"title": ["a"]}) == ""
    owner = ObjectId()
    assert unindexable_reason({"content_md": "x", "title": "t", "author_id": owner}) is None
    assert unindexable_reason({"content_md": None, "author_id": owner}) is None  # empty note
    reason = unindexable_reason({"content_md": Binary(b"x"), "author_id": owner})
    assert reason is not None and reason.startswith("content_md is a Binary, not text")
    assert "title is a boolean" in (unindexable_reason({"title": False, "author_id": owner}) or "")
    # Every read scopes by the owner's ObjectId: a note owned by a string or a number was
    # indexed and reported so, yet nobody could ever reach it.
    for author in (str(owner), 1):
        reason = unindexable_reason({"content_md": "x", "author_id": author}) or ""
        assert "not an ObjectId: no user can reach the note" in reason, reason


def test_tags() -> None:
    assert note_tags({"tags": "ops"}) == ["ops"]
    assert note_tags({"tags": ["a", None, 3, {"x": 1}, ["y"], "", "a", True]}) == ["a", "3"]
    assert note_tags({"tags": {"a": 1}}) == [] and note_tags({}) == []


def test_status() -> None:
    assert note_status({}) == "active" and note_status({"status": None}) == "active"
    assert note_status({"status": "trashed"}) == "trashed"
    assert note_status({"status": "archived"}) == "trashed"  # never shown as searchable


def test_times() -> None:
    day = datetime(2024, 1, 2, tzinfo=UTC)
    assert as_datetime("2024-01-02T00:00:00Z") == day
    assert as_datetime("2024-01-02T01:00:00+01:00") == day
    assert as_datetime("2024-01-02") == day and as_datetime(datetime(2024, 1, 2)) == day
    assert as_datetime(Int64(1_704_153_600_000)) == day  # epoch ms, as MongoDB reads them
    assert as_datetime(1_704_153_600_000.0) == day
    assert as_datetime(1_704_153_600) is None  # a 32-bit integer: $convert refuses it too
    # As $convert reads them: truncated toward zero to whole milliseconds,
    # decimals too, and nothing past what a date can hold.
    assert as_datetime(1_704_153_600_000.7) == day
    assert as_datetime(-1.5) == datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
    assert as_datetime(Decimal128("1704153600000")) == day
    for far in (Int64(253_402_300_800_000), Int64(-62_135_596_800_001), 3e14, float("nan")):
        assert as_datetime(far) is None, far
    assert as_datetime("last tuesday") is None and as_datetime(10**30) is None
    # Strings as the migration's $convert reads them: whole milliseconds, a
    # four-digit year ("10000-01-01" read as 2000), nothing an offset pushes out of range.
    assert as_datetime("2024-01-02T00:00:00.123456Z") == day.replace(microsecond=123000)
    for far in ("0000-01-01", "9999-12-31T23:00:00-05:00", "10000-01-01"):
        assert as_datetime(far) is None, far
    assert as_datetime("0999-01-01") == datetime(999, 1, 1, tzinfo=UTC)
    assert as_datetime("9999-01-01T00:00:00Z") == datetime(9999, 1, 1, tzinfo=UTC)
    assert as_datetime(Int64(253_402_300_799_999)) is not None
    assert as_datetime(253_402_300_799_999.5) is not None  # truncated first, then checked
    assert as_datetime(True) is None and as_datetime([day]) is None
    oid = ObjectId.from_datetime(day)
    assert note_created_at({"_id": oid, "created_at": "junk"}) == day
    assert note_created_at({"_id": "legacy-1"}) == EPOCH
    assert note_updated_at({"_id": oid, "updated_at": None}) == day
