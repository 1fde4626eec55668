"""The per-note loop's verdict on a note's state after a run that did not end it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from api.migration.drive import WORKERS_FIRST_S, settle

NOW = datetime(2025, 6, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("state", "kind"),
    [
        (None, "skipped"),
        ({"status": "trashed", "index_status": "pending"}, "skipped"),
        ({"status": "active", "index_status": "indexed"}, "indexed"),
        ({"status": "active", "index_status": "failed", "index_error": "x"}, "failed"),
        ({"status": "active", "index_status": "disabled"}, "skipped"),
        (
            {
                "status": "active",
                "index_status": "indexing",
                "index_attempts": 1,
                "lease_expires_at": NOW + timedelta(seconds=7),
            },
            "wait",
        ),
        (
            {
                "status": "active",
                "index_status": "indexing",
                "index_attempts": 1,
                "lease_expires_at": NOW - timedelta(seconds=1),
            },
            "retry",
        ),
        (
            {
                "status": "active",
                "index_status": "indexing",
                "index_attempts": 5,
                "lease_expires_at": NOW - timedelta(seconds=1),
            },
            "failed",
        ),
        (
            {
                "status": "active",
                "index_status": "pending",
                "index_attempts": 2,
                "next_attempt_at": NOW + timedelta(seconds=3),
            },
            "wait",
        ),
        (
            {
                "status": "active",
                "index_status": "pending",
                "index_attempts": 0,
                "next_attempt_at": NOW,
            },
            "retry",
        ),
        (
            {
                "status": "active",
                "index_status": "pending",
                "index_attempts": 5,
                "next_attempt_at": NOW,
            },
            "requeue",
        ),
        ({"status": "active", "index_status": "pending"}, "requeue"),  # no queue fields
        ({"status": "active"}, "requeue"),  # legacy, not enqueued yet
    ],
)
def test_settle(state: dict[str, Any] | None, kind: str) -> None:
    verdict = settle(state, NOW, max_attempts=5)
    assert verdict.kind == kind
    assert verdict.final == (kind in ("indexed", "failed", "skipped"))


def test_settle_waits_for_the_later_of_lease_and_retry() -> None:
    lease = {
        "status": "active",
        "index_status": "indexing",
        "index_attempts": 1,
        "lease_expires_at": NOW + timedelta(seconds=7),
    }
    assert settle(lease, NOW, 5).wait_s == pytest.approx(7)
    retry = {
        "status": "active",
        "index_status": "pending",
        "index_attempts": 1,
        "next_attempt_at": NOW + timedelta(seconds=3),
    }
    assert settle(retry, NOW, 5).wait_s == pytest.approx(3)


def test_settle_leaves_a_users_write_to_the_workers_for_a_moment() -> None:
    """Edited while the migration's run held it: pending, due, unreserved, stamped by the
    write (`changed_at` = `next_attempt_at`). Held for WORKERS_FIRST_S from when it became
    claimable (the run's end), then the migration's to claim; any other pending note is
    claimed at once."""
    edited = {
        "status": "active",
        "index_status": "pending",
        "index_attempts": 0,
        "changed_at": NOW - timedelta(seconds=5),
        "next_attempt_at": NOW - timedelta(seconds=5),
        "indexed_at": NOW - timedelta(seconds=0.25),  # the run that the edit overtook
        "reserved_until": None,
    }
    verdict = settle(edited, NOW, 5)
    assert (verdict.kind, verdict.final) == ("hold", False)
    assert verdict.wait_s == pytest.approx(WORKERS_FIRST_S - 0.25)
    later = NOW + timedelta(seconds=WORKERS_FIRST_S)
    assert settle(edited, later, 5).kind == "retry"  # no worker took it
    requeued = {**edited, "changed_at": NOW - timedelta(days=1)}  # a start-up re-queue
    assert settle(requeued, NOW, 5).kind == "retry"
    reserved = {**edited, "reserved_until": NOW + timedelta(seconds=30)}
    assert settle(reserved, NOW, 5).kind == "retry"
    legacy = {k: v for k, v in edited.items() if k != "changed_at"}
    assert settle(legacy, NOW, 5).kind == "retry"
    # What enqueueing leaves on a legacy note: filled a millisecond before its re-queue.
    filled = {**edited, "changed_at": edited["next_attempt_at"] - timedelta(milliseconds=1)}
    assert settle(filled, NOW, 5).kind == "retry"
    # A legacy `indexed_at` that is no date, or one from a clock ahead, holds no longer.
    odd = {**edited, "indexed_at": "2024-01-01"}
    assert settle(odd, NOW, 5).kind == "retry"
    ahead = {**edited, "indexed_at": NOW + timedelta(minutes=5)}
    assert settle(ahead, NOW, 5).wait_s == pytest.approx(WORKERS_FIRST_S)
