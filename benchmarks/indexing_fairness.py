"""One user's backlog against another user's fresh note: do users take turns?

Alice has a backlog of notes queued (a bulk import); Bob writes notes a moment later. All
are parked, then released at once to the app's two worker loops, Alice's due a second
before Bob's (she queued first). Measured: how long until each of Bob's notes is indexed,
and how long the whole queue takes to drain, with the default claim order (users take
turns, `api.indexing.fairness`) and with the baseline in the same run: the most overdue
note of anyone (first come, first served). Modes alternate over rounds, each in a fresh
database.

Reproduce: `.venv/bin/python -m benchmarks.indexing_fairness` (writes the section
`indexing_fairness` of docs/benchmarks/indexing.md and its claim row).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bson import ObjectId

from api.indexing.worker import IndexWorkers
from benchmarks.common import (
    Claim,
    code_revision,
    machine_note,
    markdown_table,
    update_claims,
    update_section,
)
from benchmarks.indexing_notes import paragraph
from benchmarks.service_harness import (
    alternating_rounds,
    bench_settings,
    drop_database,
    in_process_app,
    wait_until,
)

MODES = ("users take turns (default)", "first come, first served (baseline)")
COMMAND = "python -m benchmarks.indexing_fairness"


async def _all_indexed(db: Any, total: int) -> bool:
    return await db.notes.count_documents({"index_status": "indexed"}) == total


async def run_round(mongo_url: str, mode: str, backlog: int, bob_notes: int) -> dict[str, Any]:
    """One round in a fresh database; times in seconds from the release."""
    db_name = f"bench_fair_{uuid.uuid4().hex[:8]}"
    settings = bench_settings(
        mongo_url, db_name, Path(tempfile.mkdtemp()), autonote_index_workers=0
    )
    try:
        async with in_process_app(settings) as running:
            db = running.container.db
            alice, bob = await running.new_user("alice"), await running.new_user("bob")

            async def post(headers: dict[str, str], i: int) -> Any:
                body = {
                    "title": f"note {i}",
                    "content_md": f"## Part\n\n{paragraph(random.Random(i))}",
                }
                resp = await running.client.post("/v1/notes", json=body, headers=headers)
                resp.raise_for_status()
                return resp.json()["id"]

            alice_ids = [await post(alice, i) for i in range(backlog)]
            bob_ids = [await post(bob, backlog + i) for i in range(bob_notes)]
            alice_oids = [ObjectId(i) for i in alice_ids]
            bob_oids = [ObjectId(i) for i in bob_ids]
            reconciler = running.container.indexing.reconciler
            if mode == MODES[1]:

                async def first_come(claims: Any) -> Any:
                    return await claims.any()

                reconciler.rotation.claim = first_come  # type: ignore[method-assign]
            running.container.embedder.load()
            workers = IndexWorkers(
                reconciler,
                concurrency=2,
                poll_s=0.05,
                stop_grace_s=settings.autonote_index_stop_grace_s,
            )
            await workers.start()
            try:
                now = datetime.now(UTC)
                await db.notes.update_many(
                    {"_id": {"$in": alice_oids}},
                    {"$set": {"next_attempt_at": now - timedelta(seconds=1)}},
                )
                released = datetime.now(UTC)
                await db.notes.update_many(
                    {"_id": {"$in": bob_oids}}, {"$set": {"next_attempt_at": now}}
                )
                workers.wake()
                # Times come from each note's own `indexed_at`; the wait polls rarely and the
                # same way in both modes (the embedded server is one process: a benchmark
                # polling it every few ms slowed the workers it measures).
                total = len(alice_oids) + len(bob_oids)
                await wait_until(
                    lambda: _all_indexed(db, total),
                    timeout_s=1800,
                    interval_s=0.5,
                    what="queue drained",
                )
            finally:
                await workers.stop()
            docs = await db.notes.find({}, {"indexed_at": 1}).to_list()
        done = {d["_id"]: (d["indexed_at"] - released).total_seconds() for d in docs}
        bob = sorted(done[i] for i in bob_oids)
        return {"mode": mode, "bob": bob, "drain": max(done.values())}
    finally:
        drop_database(mongo_url, db_name)


def _medians(rounds: list[dict[str, Any]]) -> dict[str, tuple[float, float, float]]:
    """Per mode: medians of Bob's first note, Bob's last note, the whole queue (s)."""
    medians = {}
    for mode in MODES:
        mine = [r for r in rounds if r["mode"] == mode]
        first = statistics.median(r["bob"][0] for r in mine)
        last = statistics.median(r["bob"][-1] for r in mine)
        drain = statistics.median(r["drain"] for r in mine)
        medians[mode] = (first, last, drain)
    return medians


def claims(rounds: list[dict[str, Any]], backlog: int) -> list[Claim]:
    """The claims-table row: Bob's first note and the drain, against first come, first
    served in the same run."""
    medians = _medians(rounds)
    (first, _, drain), (base_first, _, base_drain) = medians[MODES[0]], medians[MODES[1]]
    return [
        Claim(
            "indexing_fairness",
            f"another user's first note, behind {backlog} queued notes: {first:.2f} s vs "
            f"{base_first:.2f} s first come, first served ({first / base_first:.2f}×); "
            f"queue drained in {drain / base_drain:.2f}× the time",
            first < base_first,
        )
    ]


def report(rounds: list[dict[str, Any]], backlog: int, bob_notes: int) -> str:
    """The `indexing_fairness` section."""
    rows = []
    medians = _medians(rounds)
    base = medians[MODES[1]]
    for mode in MODES:
        first, last, drain = medians[mode]
        rows.append(
            [
                mode,
                len([r for r in rounds if r["mode"] == mode]),
                f"{first:.2f}",
                f"{last:.2f}",
                f"{drain:.2f}",
                f"{first / base[0]:.2f}×",
                f"{last / base[1]:.2f}×",
                f"{drain / base[2]:.2f}×",
            ]
        )
    table = markdown_table(
        [
            "claim order",
            "rounds",
            "Bob's 1st note indexed s",
            "Bob's last note s",
            "whole queue drained s",
            "1st ÷ baseline",
            "last ÷ baseline",
            "drain ÷ baseline",
        ],
        rows,
    )
    revision = code_revision("api/indexing")
    setup = (
        f"Alice has {backlog} one-section notes queued (a bulk import); Bob then writes "
        f"{bob_notes}. All are parked, then released at once to the app's two worker loops "
        "(local ONNX model, embedded database), Alice's due a second before Bob's. Times from "
        "the release to each note's `indexed_at` (the run waits polling every 0.5 s, alike in "
        "both modes), medians over rounds; modes alternate, each round in a fresh database. "
        "*Baseline*: the most overdue note of anyone (first come, first served)."
    )
    return (
        "## Indexing fairness between users\n\n"
        f"Reproduce: `{COMMAND}`. "
        f"{machine_note()} Code: {revision}.\n\n{setup}\n\n{table}\n"
    )


async def main_async(rounds: int, backlog: int, bob_notes: int) -> list[dict[str, Any]]:
    return await alternating_rounds(
        MODES,
        rounds,
        lambda url, mode: run_round(url, mode, backlog, bob_notes),
        lambda r: f"Bob {[round(t, 2) for t in r['bob']]} drain {r['drain']:.2f}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backlog", type=int, default=200)
    parser.add_argument("--bob-notes", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    results = asyncio.run(main_async(args.rounds, args.backlog, args.bob_notes))
    body = report(results, args.backlog, args.bob_notes)
    print(body)
    if not args.no_write:
        update_section("indexing_fairness", body)
        update_claims(claims(results, args.backlog), COMMAND)


if __name__ == "__main__":
    main()
