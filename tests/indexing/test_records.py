"""The reconciler's pure builders: back-off, chunk documents, stats and index fields."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime

from bson import ObjectId

from api.chunking import MarkdownChunker
from api.indexing.records import backoff_seconds, chunk_document, index_fields, index_stats
from api.indexing.types import IndexStats, Progress


def test_backoff_doubles_with_equal_jitter_and_stops_at_the_cap() -> None:
    rng = random.Random(7)
    for attempt, ceiling in ((0, 2.0), (1, 2.0), (2, 4.0), (3, 8.0), (9, 512.0), (10, 600.0)):
        delays = [backoff_seconds(attempt, 2.0, 600.0, rng) for _ in range(200)]
        # Half the ceiling is fixed, the other half random: never early, never past the cap.
        assert min(delays) >= ceiling / 2 and max(delays) <= ceiling
        assert max(delays) - min(delays) > ceiling / 4  # the jitter really spreads retries


def test_chunk_document_carries_the_chunk_the_owner_and_the_model() -> None:
    note = {"_id": ObjectId(), "author_id": ObjectId(), "tags": ["ops", "db"]}
    content = "# Backups\n\nNightly at 02:00.\n\n```sh\npg_dump app > app.sql\n```\n"
    chunks = MarkdownChunker(max_chunk_tokens=300).chunk_note(content, "Runbook")
    now = datetime(2026, 11, 22, tzinfo=UTC)
    docs = [
        chunk_document(note, 3, c, [0.5, 0.25], model_key="local:minilm", now=now) for c in chunks
    ]
    assert len(docs) == len(chunks) >= 1
    for doc, chunk in zip(docs, chunks, strict=True):
        assert doc["note_id"] == note["_id"] and doc["author_id"] == note["author_id"]
        assert doc["note_version"] == 3 and doc["created_at"] == now
        assert doc["embedding"] == [0.5, 0.25] and doc["embedding_model"] == "local:minilm"
        expected = chunk.to_dict()
        keys = ("content_md", "start_offset", "end_offset", "content_hash", "token_count")
        for key in (*keys, "section_index"):
            assert doc[key] == expected[key]
        assert doc["heading_path"] == ["Runbook", "Backups"]
        assert content[doc["start_offset"] : doc["end_offset"]].strip() == doc["content_md"].strip()
    # Tags are a copy: retagging the note object later cannot change a written document.
    note["tags"].append("later")
    assert docs[0]["tags"] == ["ops", "db"]
    assert (
        chunk_document({**note, "tags": None}, 1, chunks[0], [], model_key="m", now=now)["tags"]
        == []
    )
    # A legacy tag longer than a filter tag can be (512) never matches a filter: it is not
    # copied into every chunk (a 200 KB tag made 60 chunks 57x the note's size).
    legacy = {**note, "tags": ["ops", "x" * 200_000, "y" * 512]}
    doc = chunk_document(legacy, 1, chunks[0], [], model_key="m", now=now)
    assert doc["tags"] == ["ops", "y" * 512]


def test_index_stats_counts_reused_chunks_and_time() -> None:
    started = time.perf_counter() - 0.05
    stats = index_stats(10, 4, 321, started)
    assert stats.chunks == 10 and stats.embedded == 4 and stats.reused == 6
    assert stats.tokens_embedded == 321 and stats.duration_ms >= 50


def test_index_stats_add_the_work_of_handed_over_runs() -> None:
    """A handed-over run's work (the note's `index_progress`) counts as embedded, not
    reused; what is stored there but is no number counts nothing."""
    carried = Progress.from_document({"embedded": 3, "tokens": 90, "ms": 1000.0})
    stats = index_stats(10, 4, 321, time.perf_counter(), carried)
    assert (stats.embedded, stats.reused, stats.tokens_embedded) == (7, 3, 411)
    assert stats.duration_ms >= 1000
    junk = Progress.from_document({"embedded": "3", "tokens": True, "ms": None})
    assert junk == Progress() and Progress.from_document("x") == Progress()


def test_index_fields_record_what_made_the_index() -> None:
    stats = IndexStats(chunks=12, embedded=2, reused=10, tokens_embedded=40, duration_ms=1.5)
    before = datetime.now(UTC)
    fields = index_fields(
        5,
        12,
        stats,
        strategy="hierarchical_markdown",
        chunking_version="v9",
        model_key="openai:text-embedding-3-small",
    )
    assert fields["indexed_version"] == 5 and fields["chunk_count"] == 12
    assert fields["chunking_strategy"] == "hierarchical_markdown"
    assert fields["chunking_version"] == "v9"
    assert fields["embedding_model"] == "openai:text-embedding-3-small"
    assert fields["last_index_stats"] == {
        "chunks": 12,
        "embedded": 2,
        "reused": 10,
        "tokens_embedded": 40,
        "duration_ms": 1.5,
    }
    assert list(fields["last_index_stats"]) == [
        "chunks",
        "embedded",
        "reused",
        "tokens_embedded",
        "duration_ms",
    ]  # the stored document's key order
    assert before <= fields["last_chunked_at"] <= datetime.now(UTC)
    assert (
        index_fields(None, 0, stats, strategy="s", chunking_version="v", model_key="m")[
            "indexed_version"
        ]
        is None
    )
