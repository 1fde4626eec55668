"""A migration on a live database: does a user's edit wait, and who indexes the backlog?

A user has a few live notes and a backlog of legacy notes (no index fields). The app runs
with its two in-process indexing workers, as `make run` does. A migration of the backlog
runs in the same process, rate-limited to `--rate` embedding requests a second; meanwhile
the user edits live notes one after another. Measured: each edit's time from the write to
its `indexed_at`, and how many backlog notes the API's workers indexed (outside the
migration's limits). Modes, alternating over rounds, each in a fresh database:

- *no migration* (the baseline): the backlog sits unindexed, nobody migrates it;
- *migration, notes reserved* (the default, `api.indexing.queue`);
- *migration, notes not reserved* (`MigrationRunner(reserve_s=None)`: each batch due at
  once in the workers' queue).

Reproduce: `.venv/bin/python -m benchmarks.migration_live` (writes the section
`migration_live` of docs/benchmarks/migration.md and its claim row).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bson import ObjectId

from api.indexing.runtime import build_indexing
from api.migration.limiter import RateLimitedEmbedder
from api.migration.repository import MigrationNotes
from api.migration.runner import RESERVE_S, MigrationRunner
from api.migration.selection import Selection
from api.providers import embedding_model_key
from benchmarks.common import (
    Claim,
    code_revision,
    machine_note,
    markdown_table,
    update_claims,
    update_section,
)
from benchmarks.service_harness import (
    alternating_rounds,
    bench_settings,
    drop_database,
    in_process_app,
    wait_until,
)
from tests.migration.support import insert_legacy

MODES = ("no migration (baseline)", "migration, notes reserved", "migration, notes not reserved")
COMMAND = "python -m benchmarks.migration_live"


class _Shared:
    """The app's embedder seen through a rate limiter that must not close it."""

    def __init__(self, limited: RateLimitedEmbedder) -> None:
        self._limited = limited

    def __getattr__(self, name: str) -> Any:
        return getattr(self._limited, name)

    async def aclose(self) -> None:
        """The app closes its own embedder."""


async def _edit_latency(running: Any, headers: dict[str, str], note_id: str, n: int) -> float:
    """PATCH the note, wait until that version is indexed; seconds from its `changed_at`
    to its `indexed_at` (both stamped by the app, so the poll's interval adds nothing)."""
    db = running.container.db
    body = {"content_md": f"## Edit\n\nThe live note, edit number {n}, about kyoto trains."}
    resp = await running.client.patch(f"/v1/notes/{note_id}", json=body, headers=headers)
    resp.raise_for_status()
    version, oid = resp.json()["version"], ObjectId(note_id)

    async def indexed() -> bool:
        note = await db.notes.find_one({"_id": oid}, {"indexed_version": 1, "index_status": 1})
        return note["index_status"] == "indexed" and note["indexed_version"] == version

    await wait_until(indexed, timeout_s=600, interval_s=0.1, what=f"edit {n} indexed")
    note = await db.notes.find_one({"_id": oid}, {"indexed_at": 1, "changed_at": 1})
    return (note["indexed_at"] - note["changed_at"]).total_seconds()


async def run_round(mongo_url: str, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """One round in a fresh database."""
    backlog, edits, interval = args.backlog, args.edits, args.interval
    rate, batch = args.rate, args.batch
    db_name = f"bench_miglive_{uuid.uuid4().hex[:8]}"
    settings = bench_settings(mongo_url, db_name, Path(tempfile.mkdtemp()))
    try:
        async with in_process_app(settings) as running:
            container = running.container
            db = container.db
            headers = await running.new_user("live user")
            owner = ObjectId(
                (await running.client.get("/v1/me", headers=headers)).json()["user_id"]
            )
            live = []
            for i in range(edits):
                body = {"title": f"live {i}", "content_md": f"## Start\n\nLive note {i}."}
                resp = await running.client.post("/v1/notes", json=body, headers=headers)
                resp.raise_for_status()
                live.append(resp.json()["id"])
            await wait_until(
                lambda: _count(db, {"index_status": "indexed"}, edits),
                timeout_s=120,
                interval_s=0.1,
                what="live notes indexed",
            )
            backlog_ids = await insert_legacy(db, backlog, [owner], seed=7)
            migration: asyncio.Task[Any] | None = None
            runner: MigrationRunner | None = None
            started = time.monotonic()
            if mode != MODES[0]:
                embedder = _Shared(
                    RateLimitedEmbedder(
                        container.embedder,
                        tokens_per_period=None,
                        requests_per_period=max(1, int(rate)),
                        period_s=1.0,
                    )
                )
                indexing = build_indexing(
                    settings, db, chunker=container.chunker, embedder=embedder, concurrency=2
                )
                selection = Selection(
                    container.chunker.version, embedding_model_key(container.embedder)
                )
                runner = MigrationRunner(
                    indexing.reconciler,
                    MigrationNotes(db),
                    selection,
                    batch_size=batch,
                    concurrency=2,
                    reserve_s=RESERVE_S if mode == MODES[1] else None,
                )
                migration = asyncio.create_task(runner.run())
                await wait_until(
                    lambda: _count(db, {"index_status": {"$in": ["pending", "indexing"]}}, 1),
                    timeout_s=60,
                    interval_s=0.05,
                    what="first batch enqueued",
                )
            # Edits at a steady pace through the migration, each on a note of its own (two
            # edits of one note would coalesce), each timed on its own.
            edit_tasks = []
            for n in range(edits):
                note_id = live[n]
                edit_tasks.append(asyncio.create_task(_edit_latency(running, headers, note_id, n)))
                await asyncio.sleep(interval)
            latencies = list(await asyncio.gather(*edit_tasks))
            by_workers = 0
            migration_s = None
            if migration is not None and runner is not None:
                stats = await migration
                migration_s = time.monotonic() - started
                by_workers = stats.indexed_by_others
                assert stats.done == backlog, stats
            indexed = await db.notes.count_documents(
                {"_id": {"$in": backlog_ids}, "index_status": "indexed"}
            )
        return {
            "mode": mode,
            "edits": latencies,
            "by_workers": by_workers,
            "backlog_indexed": indexed,
            "migration_s": migration_s,
        }
    finally:
        drop_database(mongo_url, db_name)


async def _count(db: Any, query: dict[str, Any], at_least: int) -> bool:
    return await db.notes.count_documents(query) >= at_least


def claims(rounds: list[dict[str, Any]], backlog: int) -> list[Claim]:
    """The claims-table row: edit latency during a migration against no migration, and
    against a migration that does not reserve its notes (no target)."""
    p50 = {
        mode: statistics.median(t for r in rounds if r["mode"] == mode for t in r["edits"])
        for mode in MODES
    }
    base, reserved, unreserved = (p50[m] for m in MODES)
    by_workers = statistics.median(r["by_workers"] for r in rounds if r["mode"] == MODES[1])
    return [
        Claim(
            "migration_live",
            f"edit → indexed P50 {reserved:.2f} s during a migration of {backlog} notes "
            f"({reserved / base:.2f}× no migration); {unreserved:.2f} s "
            f"({unreserved / base:.2f}×) when the migration does not reserve its notes; the "
            f"API's workers indexed {by_workers:.0f} of {backlog} backlog notes",
        )
    ]


def report(rounds: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """The `migration_live` section."""
    medians: dict[str, float] = {}
    rows = []
    for mode in MODES:
        mine = [r for r in rounds if r["mode"] == mode]
        every = sorted(t for r in mine for t in r["edits"])
        medians[mode] = statistics.median(every)
        durations = [r["migration_s"] for r in mine if r["migration_s"] is not None]
        rows.append(
            [
                mode,
                len(mine),
                len(every),
                f"{medians[mode]:.2f}",
                f"{statistics.fmean(every):.2f}",
                f"{every[-1]:.2f}",
                "",  # P50 ÷ baseline, below
                f"{statistics.median(r['by_workers'] for r in mine):.0f} of {args.backlog}"
                if durations
                else "—",
                f"{statistics.median(durations):.1f}" if durations else "—",
            ]
        )
    base = medians[MODES[0]]
    for row, mode in zip(rows, MODES, strict=True):
        row[6] = f"{medians[mode] / base:.2f}×"
    table = markdown_table(
        [
            "mode",
            "rounds",
            "edits",
            "edit → indexed P50 s",
            "mean s",
            "max s",
            "P50 ÷ baseline",
            "backlog notes the API's workers indexed (median)",
            "migration s (median)",
        ],
        rows,
    )
    revision = code_revision("api/migration", "api/indexing")
    setup = (
        f"One user, {args.edits} live notes and {args.backlog} legacy notes; the app's two "
        "in-process workers (local ONNX model, embedded database). The migration runs in the "
        f"same process: `--concurrency 2`, batches of {args.batch}, rate-limited to "
        f"{args.rate:g} embedding requests a second. Meanwhile the user edits each live note "
        f"once, one edit every {args.interval:g} s from the migration's first batch on. "
        "Edit times are from the "
        "note's `changed_at` to its `indexed_at`; medians over every edit of the mode. Modes "
        "alternate, each round in a fresh database. *notes not reserved*: what the migration "
        "does without reservations (`MigrationRunner(reserve_s=None)`)."
    )
    return (
        "## A migration on a live database\n\n"
        f"Reproduce: `{COMMAND}`. "
        f"{machine_note()} Code: {revision}.\n\n{setup}\n\n{table}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backlog", type=int, default=400)
    parser.add_argument("--edits", type=int, default=8)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between edits")
    parser.add_argument("--rate", type=float, default=20.0, help="requests a second")
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    results = asyncio.run(
        alternating_rounds(
            MODES,
            args.rounds,
            lambda url, mode: run_round(url, mode, args),
            lambda r: f"edits {[round(t, 2) for t in r['edits']]} by workers {r['by_workers']}",
        )
    )
    body = report(results, args)
    print(body)
    if not args.no_write:
        update_section("migration_live", body)
        update_claims(claims(results, args.backlog), COMMAND)


if __name__ == "__main__":
    main()
