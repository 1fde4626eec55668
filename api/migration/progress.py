"""Progress and results for operators: a rich progress bar (rate, ETA) on a terminal,
periodic `migration.progress` log lines otherwise, and the final tables."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Protocol

import structlog
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from api.migration.estimate import Estimate
from api.migration.types import MigrationSummary

log = structlog.get_logger(__name__)


def rate_and_eta(done: int, total: int, elapsed_s: float) -> tuple[float, float | None]:
    """(notes per second so far, seconds left at that rate or None while unknown)."""
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    if rate <= 0:
        return 0.0, None
    return rate, max(total - done, 0) / rate


class ProgressReporter(Protocol):
    """Receives `start(total)`, then `update(done, **counts)` as notes finish, then `stop()`."""

    def start(self, total: int) -> None: ...

    def update(self, done: int, **counts: int) -> None: ...

    def stop(self) -> None: ...


class NullProgress:
    """Reports nothing (`--progress none`)."""

    def start(self, total: int) -> None:
        """Ignore."""

    def update(self, done: int, **counts: int) -> None:
        """Ignore."""

    def stop(self) -> None:
        """Ignore."""


class LogProgress:
    """A `migration.progress` log line (done, total, rate, eta_s, counts) every
    `interval_s` while running, and one at the end. For logs collected by machines."""

    def __init__(self, interval_s: float = 5.0, event: str = "migration.progress") -> None:
        self.interval_s = interval_s
        self.event = event
        self.total = 0
        self.done = 0
        self.counts: dict[str, int] = {}
        self._started = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self, total: int) -> None:
        """Begin timing; call from inside the event loop (starts the periodic task)."""
        self.total = total
        self._started = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._tick())

    def update(self, done: int, **counts: int) -> None:
        """Record the latest counts (logged at the next tick)."""
        self.done = done
        self.counts = counts

    def emit(self) -> None:
        """Log one progress line now."""
        rate, eta = rate_and_eta(self.done, self.total, time.monotonic() - self._started)
        log.info(
            self.event,
            done=self.done,
            total=self.total,
            rate=round(rate, 2),
            eta_s=None if eta is None else round(eta, 1),
            **self.counts,
        )

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            self.emit()

    def stop(self) -> None:
        """Stop ticking and log the final line."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
            self.emit()


class RateColumn(ProgressColumn):
    """Notes per second (rich's own speed estimate over recent updates)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("-- notes/s" if speed is None else f"{speed:,.1f} notes/s", style="cyan")


class BarProgress:
    """A rich progress bar with count, rate, elapsed time and ETA (for a terminal)."""

    def __init__(self, console: Console, description: str = "Indexing notes") -> None:
        self.description = description
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            RateColumn(),
            TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._task_id: Any = None

    def start(self, total: int) -> None:
        """Show the bar."""
        self._progress.start()
        self._task_id = self._progress.add_task(self.description, total=total, counts="")

    def update(self, done: int, **counts: int) -> None:
        """Move the bar."""
        if self._task_id is None:
            return
        shown = ", ".join(f"{k} {v:,}" for k, v in counts.items() if v)
        self._progress.update(self._task_id, completed=done, counts=shown)

    def stop(self) -> None:
        """Leave the final bar on screen."""
        self._progress.stop()


def _n(value: int) -> str:
    return f"{value:,}"


def _money(value: float | None) -> str:
    return "unknown (no price for this model)" if value is None else f"${value:,.4f}"


def render_estimate(estimate: Estimate, console: Console) -> None:
    """The dry run's table."""
    table = Table(title="Migration dry run — nothing was changed", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", justify="right")
    reasons = ", ".join(f"{k} {v:,}" for k, v in estimate.reasons.items() if v) or "-"
    table.add_row("Notes to index", _n(estimate.notes))
    table.add_row("  why", reasons)
    table.add_row("Chunks", _n(estimate.chunks))
    table.add_row("Tokens (all chunks)", _n(estimate.tokens))
    table.add_row(
        "Reusable (stored/cached)",
        f"{_n(estimate.reusable_tokens)} tokens in {_n(estimate.reusable_chunks)} chunks",
    )
    table.add_row("Tokens to embed", _n(estimate.tokens_to_embed))
    table.add_row("Embedding model", estimate.model)
    price = estimate.price_per_million
    table.add_row("Price per 1M tokens", "unknown" if price is None else f"${price:g}")
    table.add_row("Estimated cost", _money(estimate.cost_usd))
    if estimate.unchunkable_count:
        table.add_row("Chunker errors", _n(estimate.unchunkable_count))
    if estimate.out_of_attempts:
        table.add_row("Out of attempts (to be marked failed)", _n(estimate.out_of_attempts))
    console.print(table)
    for note_id, error in estimate.unchunkable[:20]:
        console.print(f"  chunker error on note {note_id}: {error}")


def render_summary(summary: MigrationSummary, console: Console) -> None:
    """The run's final table (also after Ctrl-C or an error)."""
    s = summary.stats
    title = "Migration interrupted" if summary.interrupted else "Migration finished"
    table = Table(title=title, show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", justify="right")
    table.add_row("Notes selected", _n(s.selected))
    table.add_row("Notes indexed", _n(s.indexed))
    if s.indexed_by_others:
        table.add_row("  of which by other workers", _n(s.indexed_by_others))
    if s.left_selection:
        table.add_row(
            "Left the selection first",
            f"{_n(s.left_selection)} (another worker indexed, deleted or trashed them)",
        )
    if s.joined_selection:
        table.add_row(
            "Joined the selection during the run",
            f"{_n(s.joined_selection)} (edited meanwhile, so they needed indexing too)",
        )
    table.add_row("Notes failed", _n(s.failed))
    skipped = ", ".join(f"{k} {v:,}" for k, v in s.skip_reasons.items())
    table.add_row("Notes skipped", _n(s.skipped) + (f" ({skipped})" if skipped else ""))
    if s.normalized:
        table.add_row("Legacy fields stored as the API writes them", _n(s.normalized))
    if s.reindexed_after_edit:
        table.add_row("Re-indexed after an edit", _n(s.reindexed_after_edit))
    if s.failed_after_edit:
        table.add_row("Failed after an edit", _n(s.failed_after_edit))
    table.add_row("Chunks", _n(s.chunks))
    table.add_row("Chunks embedded / reused", f"{_n(s.embedded)} / {_n(s.reused)}")
    table.add_row("Tokens embedded", _n(s.tokens_embedded))
    table.add_row("Duration", f"{summary.duration_s:,.1f} s")
    console.print(table)
    for note_id, error in s.failures[:20]:
        console.print(f"  failed: note {note_id}: {error}")
    if summary.interrupted:
        console.print("Interrupted: run the same command again to resume.")
    if summary.error:
        console.print(f"Stopped by an error: {summary.error}. Run again to resume.")


def stop_quietly(reporter: ProgressReporter) -> None:
    """Stop a reporter, never masking the error that is ending the run."""
    with contextlib.suppress(Exception):
        reporter.stop()
