"""The integrity rules on hand-made documents (pure: no database)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from bson import ObjectId
from bson.binary import Binary, BinaryVectorDtype

from api.chunk_store.vectors import to_bson_vector
from api.integrity.report import CheckReport, render
from api.integrity.rules import (
    Expectations,
    Finding,
    check_missing_note,
    check_note,
    id_sort_key,
    model_dimensions,
    persistent,
    vector_problem,
)

MODEL = "local-model@4"
EXPECT = Expectations(model_key=MODEL, dimensions=4)
CONTENT = "# Title\n\nFirst paragraph.\n\n## Two\n\nSecond paragraph."
AUTHOR = ObjectId()


def vec(n: int = 4) -> Binary:
    return to_bson_vector(np.arange(1, n + 1, dtype=np.float32))


def note(**over: Any) -> dict[str, Any]:
    doc = {
        "_id": ObjectId(),
        "author_id": AUTHOR,
        "status": "active",
        "version": 2,
        "content_md": CONTENT,
        "index_status": "indexed",
        "indexed_version": 2,
        "chunk_count": 2,
        "embedding_model": MODEL,
        "chunking_strategy": "hierarchical_markdown",
    }
    doc.update(over)
    return doc


def chunk(n: dict[str, Any], index: int, **over: Any) -> dict[str, Any]:
    text = ("First paragraph.", "Second paragraph.")[index]
    start = CONTENT.index(text)
    end = start + len(text)
    doc = {
        "_id": ObjectId(),
        "note_id": n["_id"],
        "author_id": n["author_id"],
        "note_version": n["indexed_version"],
        "chunk_index": index,
        "chunk_type": "paragraph",
        "content_md": CONTENT[start:end],
        "start_offset": start,
        "end_offset": end,
        "embedding": vec(),
        "embedding_model": MODEL,
        "metadata": {},
    }
    doc.update(over)
    return doc


def kinds(findings: list[Finding]) -> dict[str, Finding]:
    out = {f.kind: f for f in findings}
    assert len(out) == len(findings), "one finding per kind and note"
    return out


def test_consistent_note_has_no_findings() -> None:
    n = note()
    assert check_note(n, [chunk(n, 0), chunk(n, 1)], EXPECT) == []


def test_chunk_spans_of_the_fixture_are_real() -> None:
    n = note()
    assert [chunk(n, i)["content_md"] for i in (0, 1)] == ["First paragraph.", "Second paragraph."]


def test_indexed_at_an_older_version_is_index_behind() -> None:
    n = note(version=3)
    found = kinds(check_note(n, [chunk(n, 0), chunk(n, 1)], EXPECT))
    assert set(found) == {"index_behind"}
    assert found["index_behind"].requeue and found["index_behind"].delete_ids == ()


@pytest.mark.parametrize("status", ["pending", "indexing"])
def test_a_queued_note_is_fine_even_with_chunks_of_its_next_version(status: str) -> None:
    n = note(version=3, index_status=status)
    next_version = [chunk(n, i, note_version=3) for i in (0, 1)]
    assert check_note(n, [chunk(n, 0), chunk(n, 1), *next_version], EXPECT) == []


@pytest.mark.parametrize("status", [None, "disabled", "weird"])
def test_neither_indexed_nor_queued(status: str | None) -> None:
    n = note(index_status=status)
    if status is None:
        del n["index_status"]
    found = kinds(check_note(n, [chunk(n, 0), chunk(n, 1)], EXPECT))
    assert set(found) == {"not_queued"}


def test_disabled_is_fine_when_chunking_is_disabled() -> None:
    n = note(index_status="disabled")
    expect = Expectations(MODEL, 4, chunking_enabled=False)
    assert check_note(n, [chunk(n, 0), chunk(n, 1)], expect) == []


def test_failed_is_listed_not_a_violation() -> None:
    n = note(
        index_status="failed",
        index_error="EmbeddingError: 500",
        indexed_version=None,
        chunk_count=0,
    )
    (f,) = check_note(n, [], EXPECT)
    assert f.kind == "failed" and not f.is_violation and not f.requeue
    assert "EmbeddingError: 500" in f.detail


def test_chunk_count_mismatch() -> None:
    n = note(chunk_count=3)
    found = kinds(check_note(n, [chunk(n, 0), chunk(n, 1)], EXPECT))
    assert set(found) == {"chunk_count"}
    assert "chunk_count 3 but 2" in found["chunk_count"].detail


def test_missing_note_orphans_are_deleted_wholesale() -> None:
    ghost = ObjectId()
    n = note(_id=ghost)
    f = check_missing_note(ghost, [chunk(n, 0), chunk(n, 1)])
    assert f.kind == "orphan_chunks" and f.chunks == 2 and f.delete_note_chunks
    assert not f.requeue


def test_trashed_note_with_chunks_after_convergence() -> None:
    n = note(status="trashed")
    found = kinds(check_note(n, [chunk(n, 0), chunk(n, 1)], EXPECT))
    assert set(found) == {"orphan_chunks"}
    f = found["orphan_chunks"]
    assert f.chunks == 2 and f.requeue and f.delete_ids == ()  # the reconciler removes them
    # ... but not while the removal is queued or running.
    assert check_note(note(status="trashed", index_status="pending"), [chunk(n, 0)], EXPECT) == []


def test_old_version_chunks_are_orphans_once_converged() -> None:
    n = note()
    old = [chunk(n, i, note_version=1) for i in (0, 1)]
    found = kinds(check_note(n, [chunk(n, 0), chunk(n, 1), *old], EXPECT))
    assert set(found) == {"orphan_chunks"}
    assert set(found["orphan_chunks"].delete_ids) == {c["_id"] for c in old}


def test_leftover_at_the_notes_own_version_is_requeued_not_deleted() -> None:
    # indexed at 1, version 2, leftovers of an interrupted run at 2: the reconciler deletes
    # version 2 itself before writing it; deleting here could race a worker.
    n = note(version=2, indexed_version=1)
    leftover = chunk(n, 0, note_version=2)
    found = kinds(check_note(n, [chunk(n, 0), chunk(n, 1), leftover], EXPECT))
    assert set(found) == {"index_behind", "orphan_chunks"}
    assert found["orphan_chunks"].delete_ids == () and found["orphan_chunks"].requeue


def test_failed_notes_leftovers_are_deleted() -> None:
    n = note(index_status="failed", indexed_version=1, version=2)
    leftover = chunk(n, 0, note_version=2)
    found = kinds(check_note(n, [chunk(n, 0), chunk(n, 1), leftover], EXPECT))
    assert found["orphan_chunks"].delete_ids == (leftover["_id"],)


def test_duplicates_keep_the_first_copy() -> None:
    n = note()
    first, second = chunk(n, 0), chunk(n, 1)
    copy = {**first, "_id": ObjectId()}
    found = kinds(check_note(n, [first, second, copy], EXPECT))
    assert set(found) == {"duplicate_chunks"}
    assert found["duplicate_chunks"].delete_ids == (copy["_id"],)


@pytest.mark.parametrize(
    ("embedding", "problem"),
    [
        (to_bson_vector(np.ones(3, dtype=np.float32)), "3 dimensions, expected 4"),
        ([0.1, 0.2, 0.3, 0.4], "not a BSON binary vector"),
        (Binary.from_vector([1, 2, 3, 4], BinaryVectorDtype.INT8), "not float32"),
        (Binary(b"\x27\x00" + b"\x00" * 15, 9), "expected 4"),  # 15 bytes: not whole floats
        (to_bson_vector(np.array([1, np.nan, 0, 0], dtype=np.float32)), "NaN"),
        (to_bson_vector(np.zeros(4, dtype=np.float32)), "zero"),
        (Binary(b"\x00" * 18, 0), "subtype 0"),
        (None, "NoneType"),
    ],
)
def test_bad_vectors(embedding: Any, problem: str) -> None:
    n = note()
    found = kinds(check_note(n, [chunk(n, 0, embedding=embedding), chunk(n, 1)], EXPECT))
    assert set(found) == {"bad_vector"}
    assert problem in found["bad_vector"].detail
    assert found["bad_vector"].requeue and len(found["bad_vector"].delete_ids) == 1


def test_chunk_model_must_equal_the_notes() -> None:
    n = note()
    found = kinds(check_note(n, [chunk(n, 0, embedding_model="other@4"), chunk(n, 1)], EXPECT))
    assert "embedded with 'other@4'" in found["bad_vector"].detail


def test_note_indexed_with_another_model_than_configured() -> None:
    n = note(embedding_model="old@8")
    chunks = [chunk(n, i, embedding_model="old@8", embedding=vec(8)) for i in (0, 1)]
    found = kinds(check_note(n, chunks, EXPECT))
    assert set(found) == {"bad_vector"}
    assert found["bad_vector"].delete_ids == () and found["bad_vector"].requeue


def test_vectors_of_another_model_are_measured_by_its_own_dimensions() -> None:
    n = note(index_status="pending", embedding_model="old@8")
    chunks = [chunk(n, i, embedding_model="old@8", embedding=vec(4)) for i in (0, 1)]
    found = kinds(check_note(n, chunks, EXPECT))
    assert "4 dimensions, expected 8" in found["bad_vector"].detail


@pytest.mark.parametrize(
    ("start", "end", "problem"),
    [
        (-1, 5, "outside"),
        (30, 20, "outside"),
        (0, len(CONTENT) + 1, "outside"),
        (None, 5, "missing"),
    ],
)
def test_offsets_outside_the_note(start: Any, end: Any, problem: str) -> None:
    n = note()
    found = kinds(
        check_note(n, [chunk(n, 0, start_offset=start, end_offset=end), chunk(n, 1)], EXPECT)
    )
    assert set(found) == {"bad_offsets"} and problem in found["bad_offsets"].detail


def test_offsets_at_the_very_end_are_inside() -> None:
    n = note(content_md=CONTENT, chunk_count=1)
    c = chunk(n, 0, start_offset=len(CONTENT), end_offset=len(CONTENT), content_md="")
    assert check_note(n, [c], EXPECT) == []


def test_content_must_be_the_notes_text() -> None:
    n = note()
    found = kinds(check_note(n, [chunk(n, 0, content_md="First paragraph!"), chunk(n, 1)], EXPECT))
    assert set(found) == {"content_mismatch"}


def test_offsets_count_characters_not_bytes() -> None:
    content = "# Ünïcödé 🎉\n\nÉté à Kyōto 🚄."
    start = content.index("Été")
    n = note(content_md=content, chunk_count=1)
    c = chunk(n, 0, start_offset=start, end_offset=len(content), content_md=content[start:])
    assert check_note(n, [c], EXPECT) == []


def test_table_parts_and_code_fragments_are_exempt_from_slicing() -> None:
    content = "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n\n```py\nx = 1\ny = 2\n```"
    n = note(content_md=content, chunk_count=2)
    row = content.index("| 3 | 4 |")
    table = chunk(
        n,
        0,
        chunk_type="table",
        start_offset=row,
        end_offset=row + 9,
        content_md="| a | b |\n|---|---|\n| 3 | 4 |",
        metadata={"header_repeated": True, "table_part": 2, "table_parts": 2},
    )
    line = content.index("y = 2")
    code = chunk(
        n,
        1,
        chunk_type="code",
        start_offset=line,
        end_offset=line + 5,
        content_md="```py\ny = 2\n```",
        metadata={"code_part": 2, "code_parts": 2},
    )
    assert check_note(n, [table, code], EXPECT) == []
    # Rebuilt content must still hold its own span.
    bad = {**code, "content_md": "```py\nz = 3\n```"}
    assert set(kinds(check_note(n, [table, bad], EXPECT))) == {"content_mismatch"}


def test_author_mismatch_is_an_isolation_violation() -> None:
    n = note()
    found = kinds(check_note(n, [chunk(n, 0, author_id=ObjectId()), chunk(n, 1)], EXPECT))
    assert set(found) == {"author_mismatch"}
    assert found["author_mismatch"].delete_ids and found["author_mismatch"].requeue


def test_several_problems_of_one_kind_merge_into_one_finding() -> None:
    n = note()
    other = ObjectId()
    found = kinds(
        check_note(n, [chunk(n, 0, author_id=other), chunk(n, 1, author_id=other)], EXPECT)
    )
    assert found["author_mismatch"].chunks == 2 and "(+1 more)" in found["author_mismatch"].detail


def test_model_dimensions_and_sort_key() -> None:
    assert model_dimensions("text-embedding-3-small@1536") == 1536
    assert model_dimensions("no-dims") is None and model_dimensions(None) is None
    ids = [ObjectId() for _ in range(5)]
    assert sorted(reversed(ids), key=id_sort_key) == ids
    assert vector_problem(vec(), 4) is None


def test_report_counts_examples_and_renders() -> None:
    from io import StringIO

    from rich.console import Console

    n = note(chunk_count=5)
    failed = note(index_status="failed", index_error="boom", indexed_version=None, chunk_count=0)
    report = CheckReport(database="db", model_key=MODEL, notes_scanned=2, chunks_scanned=2)
    report.findings = check_note(n, [chunk(n, 0), chunk(n, 1)], EXPECT) + check_note(
        failed, [], EXPECT
    )
    data = report.to_dict()
    assert not data["ok"] and data["violations"] == 1
    assert data["kinds"]["chunk_count"]["notes"] == 1
    assert data["kinds"]["failed"] == {
        "violation": False,
        "notes": 1,
        "chunks": 0,
        "examples": [f"note {failed['_id']}: indexing failed: boom"],
    }
    out = StringIO()
    render(report, Console(file=out, width=200), 3)
    text = out.getvalue()
    assert "chunk_count VIOLATION" in text and "failed listed" in text
    assert "result: 1 violation(s)" in text and "not judged" not in text
    report.unsettled = 2
    out = StringIO()
    render(report, Console(file=out, width=200), 3)
    assert "2 note(s) changed during every confirmation read" in out.getvalue()
    assert report.to_dict()["unsettled"] == 2


def test_an_edited_note_is_not_compared_with_its_previous_versions_chunks() -> None:
    # Edited to version 3 (queued): the indexed chunks describe version 2's text.
    n = note(version=3, index_status="pending", content_md="Completely new text.")
    assert check_note(n, [chunk(n, 0), chunk(n, 1)], EXPECT) == []


def test_persistent_keeps_only_what_both_confirmations_found() -> None:
    n = note(version=4, indexed_version=4)
    live = [chunk(n, 0), chunk(n, 1)]
    v2 = [chunk(n, i, note_version=2) for i in (0, 1)]  # a dead version that stays
    v3 = [chunk(n, i, note_version=3) for i in (0, 1)]  # evicted between the two passes
    earlier = check_note(n, [*live, *v2, *v3], EXPECT)
    later_n = note(_id=n["_id"], version=5, indexed_version=5)
    v4 = [chunk(later_n, i, note_version=4) for i in (0, 1)]  # being evicted now
    v5 = [chunk(later_n, 0), chunk(later_n, 1)]
    later = check_note(later_n, [*v5, *v2, *v4], EXPECT)
    assert {c for f in later for c in f.delete_ids} == {c["_id"] for c in v2 + v4}

    [kept] = persistent(earlier, later)
    assert kept.kind == "orphan_chunks" and kept.chunks == 2
    assert set(kept.delete_ids) == {c["_id"] for c in v2}
    assert str(v2[0]["_id"]) in kept.detail and "(+1 more)" in kept.detail
    # Nothing in common: a different version passing through each time.
    passing = check_note(n, [*live, *v3], EXPECT)
    assert passing and persistent(passing, check_note(later_n, [*v5, *v4], EXPECT)) == []


def test_persistent_note_level_and_missing_note_findings() -> None:
    n = note()
    count = check_note(note(_id=n["_id"], chunk_count=7), [chunk(n, 0), chunk(n, 1)], EXPECT)
    behind = check_note(note(_id=n["_id"], version=3), [chunk(n, 0), chunk(n, 1)], EXPECT)
    assert persistent(count, count) == count
    assert persistent(count, behind) == [] and persistent(behind, count) == []
    gone = ObjectId()
    missing = [check_missing_note(gone, [{"_id": ObjectId(), "note_id": gone}])]
    assert persistent(missing, missing) == missing
    assert persistent([], missing) == [] and persistent(missing, []) == []
