"""What operators see: periodic `migration.progress` log lines, the rich bar, and the final
tables (rendered into a string console)."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Iterator

import pytest
import structlog
from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase
from rich.console import Console
from structlog.testing import capture_logs

from api.config import Settings
from api.migration.estimate import Estimate
from api.migration.execute import MigrateOptions, ProgressMode, execute
from api.migration.progress import LogProgress, render_estimate, render_summary
from api.migration.types import MigrationStats, MigrationSummary
from tests.migration.support import insert_legacy


@pytest.fixture
def info_logs() -> Iterator[None]:
    """Let INFO through (another test may have configured WARNING), then restore."""
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    yield
    structlog.configure(**saved)


async def test_log_progress_emits_done_total_rate_eta(info_logs: None) -> None:
    reporter = LogProgress(interval_s=0.05)
    with capture_logs() as logs:
        reporter.start(10)
        reporter.update(4, indexed=4, failed=0)
        await asyncio.sleep(0.18)
        reporter.update(10, indexed=9, failed=1)
        reporter.stop()
    lines = [x for x in logs if x["event"] == "migration.progress"]
    assert len(lines) >= 3
    assert lines[0]["done"] == 4 and lines[0]["total"] == 10 and lines[0]["rate"] > 0
    assert lines[0]["eta_s"] > 0 and lines[0]["indexed"] == 4
    assert (lines[-1]["done"], lines[-1]["eta_s"], lines[-1]["failed"]) == (10, 0.0, 1)


async def test_bar_and_tables_in_a_real_run(settings: Settings, db: AsyncDatabase) -> None:
    await insert_legacy(db, 5, [ObjectId()])
    out = io.StringIO()
    code = await execute(settings, MigrateOptions(progress=ProgressMode.bar), stdout=out)
    text = out.getvalue()
    assert code == 0
    assert "Indexing" in text and "5/5" in text and "notes/s" in text  # the bar's last frame
    assert "Migration finished" in text and "Notes indexed" in text


def table(render: object, value: object) -> str:
    console = Console(file=io.StringIO(), width=120)
    render(value, console)  # type: ignore[operator]
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_estimate_table() -> None:
    est = Estimate(
        model="text-embedding-3-large",
        price_per_million=0.13,
        notes=1200,
        chunks=5000,
        tokens=2_000_000,
        reusable_chunks=1000,
        reusable_tokens=400_000,
        tokens_to_embed=1_600_000,
    )
    est.reasons["legacy"] = 1000
    est.reasons["failed"] = 200
    text = table(render_estimate, est)
    for expected in (
        "nothing was changed",
        "1,200",
        "legacy 1,000, failed 200",
        "5,000",
        "2,000,000",
        "400,000 tokens in 1,000 chunks",
        "1,600,000",
        "text-embedding-3-large",
        "$0.13",
        "$0.2080",
    ):
        assert expected in text, expected


def test_summary_table_lists_failures_and_interruption() -> None:
    stats = MigrationStats(
        selected=10,
        done=7,
        indexed=6,
        failed=1,
        chunks=20,
        embedded=15,
        reused=5,
        tokens_embedded=900,
        failures=[("65f0c2aa0000000000000000", "EmbeddingError: 500")],
    )
    text = table(render_summary, MigrationSummary(stats, 12.5, interrupted=True))
    for expected in (
        "Migration interrupted",
        "Notes selected",
        "15 / 5",
        "900",
        "12.5 s",
        "65f0c2aa0000000000000000: EmbeddingError: 500",
        "run the same command again",
    ):
        assert expected in text, expected
