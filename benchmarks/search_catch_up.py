"""Search catch-up: what read-your-writes costs a search; what the `indexed_at` index saves.

    .venv/bin/python -m benchmarks.search_catch_up

A local-backend search first waits for its author's commits under way in this process
(`LocalIndexSync.catch_up`: a commit and the refresh of the in-process index after it), so
a note that reads `indexed` is searchable at once. Two measurements, each against a baseline
in the same run:

1. *Search latency while the same author's notes are being indexed* (the only time a search
   can wait), catch-up on vs off (the same app, `LocalBackend.catch_up` unset), alternating
   search by search, through the HTTP API of the real app (embedded server, local model,
   local index, 2 in-process workers): `--notes` notes are posted at once, then the author
   searches until they are all indexed. Questions are new each time (embedded per search).
2. *The poll* every process runs twice a second to follow other processes' commits
   (`IndexQueue.indexed_since`) on `--rows` note documents, with the `indexed_at` index vs
   without it (dropped, then created again: A B A).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bson import ObjectId
from pymongo import AsyncMongoClient

from api.db.client import NOTES_INDEXES
from api.indexing.queue import IndexQueue
from api.logging import configure_logging
from api.retrieval.local.sync import CLOCK_SKEW
from benchmarks.common import (
    Claim,
    code_revision,
    machine_note,
    markdown_table,
    update_claims,
    update_section,
)
from benchmarks.service_harness import (
    bench_settings,
    embedded_server,
    in_process_app,
    summarize,
    wait_until,
)

COMMAND = "python -m benchmarks.search_catch_up"
TOPICS = ["backup", "restore", "deploy", "rotation", "incident", "billing", "search", "cache"]
QUERIES = [f"how do we handle the {t} procedure?" for t in TOPICS]


def _note(i: int) -> dict[str, Any]:
    topic = TOPICS[i % len(TOPICS)]
    body = f"## {topic.title()}\n\nStep {i}: the {topic} procedure runs after review {i}."
    return {"title": f"{topic} {i}", "content_md": body}


async def search_latency(url: str, notes: int) -> dict[str, Any]:
    """Per-search seconds with the catch-up on and off, alternating, while indexing runs."""
    with tempfile.TemporaryDirectory(prefix="autonote-catchup-") as data:
        settings = bench_settings(url, "bench_catch_up", Path(data), autonote_index_workers=2)
        return await _search_latency(settings, notes)


async def _search_latency(settings: Any, notes: int) -> dict[str, Any]:
    async with in_process_app(settings) as app:
        h = await app.new_user()
        db = app.container.db
        r = await app.client.post("/v1/notes", json=_note(0), headers=h)  # loads the model
        assert r.status_code == 201, r.text
        await wait_until(lambda: _all_indexed(db), timeout_s=600, interval_s=0.1, what="warm")
        backend = app.container.search.backend
        catch_up = backend.catch_up
        waited: list[int] = []

        async def counted(author_id: ObjectId) -> int:
            n = await catch_up(author_id)
            waited.append(n)
            return n

        samples: dict[str, list[float]] = {"on": [], "off": []}
        for i in range(1, notes + 1):
            r = await app.client.post("/v1/notes", json=_note(i), headers=h)
            assert r.status_code == 201, r.text
        asked = 0
        while asked < 2 or not await _all_indexed(db):  # at least one search per mode
            mode = ("on", "off")[asked % 2]
            backend.catch_up = counted if mode == "on" else None
            asked += 1
            query = f"{QUERIES[asked % len(QUERIES)]} (ticket {asked})"
            start = time.perf_counter()
            r = await app.client.post("/v1/search", json={"query": query}, headers=h)
            samples[mode].append(time.perf_counter() - start)
            assert r.status_code == 200, r.text
        backend.catch_up = catch_up
    return {
        "samples": samples,
        "notes": notes,
        "waited_searches": sum(1 for n in waited if n),
        "waited_commits": sum(waited),
    }


async def _all_indexed(db: Any) -> bool:
    return await db.notes.count_documents({"index_status": {"$ne": "indexed"}}) == 0


async def _median_s(call: Callable[[], Awaitable[Any]], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        await call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def follow_queries(url: str, rows: int, authors: int, repeats: int) -> list[dict[str, Any]]:
    """Median seconds of the poll, with and without the `indexed_at` index."""
    client: AsyncMongoClient = AsyncMongoClient(url)
    db = client["bench_catch_up_queries"]
    try:
        await client.drop_database(db.name)
        await db.notes.create_indexes(NOTES_INDEXES)
        rng = random.Random(1)
        owners = [ObjectId() for _ in range(authors)]
        newest = datetime.now(UTC).replace(microsecond=0)
        docs = [
            {
                "author_id": owners[i % authors],
                "title": f"note {i}",
                "status": "active",
                "index_status": "indexed",
                "version": 1,
                "indexed_version": 1,
                "chunk_count": 3,
                "tags": [],
                # A day of commits: the poll's 5 s window holds a few of them.
                "indexed_at": newest - timedelta(seconds=rng.uniform(0, 86_400)),
            }
            for i in range(rows)
        ]
        for start in range(0, rows, 5000):
            await db.notes.insert_many(docs[start : start + 5000])
        since = newest - CLOCK_SKEW
        queue = IndexQueue(db)

        async def poll() -> Any:
            return await queue.indexed_since(since, 1000, inclusive=True)

        results = []
        for phase in ("with", "without", "with, again"):
            if phase == "without":
                await db.notes.drop_index("indexed_at")
            elif phase == "with, again":
                await db.notes.create_indexes(NOTES_INDEXES)
            results.append(
                {
                    "phase": phase,
                    "poll_s": await _median_s(poll, repeats),
                    "poll_rows": len(await poll()),
                }
            )
        return results
    finally:
        await client.drop_database(db.name)
        await client.close()


def claims(latency: dict[str, Any], follow: list[dict[str, Any]], rows: int) -> list[Claim]:
    """The claims-table row: catch-up on ÷ off while indexing, and the poll with its index
    against without (no target)."""
    on, off = (summarize(latency["samples"][m]) for m in ("on", "off"))
    base = statistics.mean(f["poll_s"] for f in follow if f["phase"] != "without")
    without = next(f for f in follow if f["phase"] == "without")
    return [
        Claim(
            "search_catch_up",
            f"searches while their author's notes are indexed, catch-up on ÷ off: P50 "
            f"{on.p50 / off.p50:.2f}×, P95 {on.p95 / off.p95:.2f}× "
            f"({latency['waited_searches']} of {on.n} searches waited); the poll over "
            f"{rows} notes is {without['poll_s'] / base:.1f}× faster with the `indexed_at` "
            "index",
        )
    ]


def render(latency: dict[str, Any], follow: list[dict[str, Any]], rows: int, authors: int) -> str:
    on, off = (summarize(latency["samples"][m]) for m in ("on", "off"))
    lat_table = markdown_table(
        ["catch-up", "searches", "P50 ms", "P95 ms", "P99 ms", "mean ms"],
        [
            ["on", on.n, f"{on.p50:.2f}", f"{on.p95:.2f}", f"{on.p99:.2f}", f"{on.mean:.2f}"],
            [
                "off",
                off.n,
                f"{off.p50:.2f}",
                f"{off.p95:.2f}",
                f"{off.p99:.2f}",
                f"{off.mean:.2f}",
            ],
            [
                "on ÷ off",
                "",
                f"{on.p50 / off.p50:.2f}×",
                f"{on.p95 / off.p95:.2f}×",
                f"{on.p99 / off.p99:.2f}×",
                f"{on.mean / off.mean:.2f}×",
            ],
        ],
    )
    base = statistics.mean(f["poll_s"] for f in follow if f["phase"] != "without")
    without = next(f for f in follow if f["phase"] == "without")
    follow_rows = [[f["phase"], f["poll_rows"], f"{f['poll_s'] * 1000:.2f}"] for f in follow]
    follow_rows.append(["without ÷ with (mean of both)", "", f"{without['poll_s'] / base:.1f}×"])
    follow_table = markdown_table(["`indexed_at` index", "rows returned", "median ms"], follow_rows)
    revision = code_revision(
        "api/retrieval/local/sync.py",
        "api/retrieval/backends.py",
        "api/indexing/reconciler.py",
        "api/indexing/commit.py",
    )
    return (
        "## Search: read-your-writes catch-up\n\n"
        f"Reproduce: `{COMMAND}`. "
        f"{machine_note()} Code: {revision}.\n\n"
        f"Search latency through the API while {latency['notes']} notes of the searching "
        "author, posted at once, are indexed by 2 in-process workers (the only time a search "
        "can wait); *off* is the same app with the catch-up unset, alternating search by "
        "search; a new question each time. "
        f"{latency['waited_searches']} of the {on.n} searches with the catch-up found a "
        f"commit of theirs under way and waited for it ({latency['waited_commits']} commits "
        "in all).\n\n"
        f"{lat_table}\n\n"
        f"The poll every process runs twice a second to follow other processes' commits, on "
        f"{rows} note documents of {authors} authors (a day of commits), since 5 s before the "
        "newest.\n\n"
        f"{follow_table}\n"
    )


async def measure(args: argparse.Namespace) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with embedded_server() as url:
        latency = await search_latency(url, args.notes)
        follow = await follow_queries(url, args.rows, args.authors, args.repeats)
    return latency, follow


def main(argv: list[str] | None = None) -> None:
    """Measure, print, and update the area page and the claim."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=200)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--authors", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--no-write", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    configure_logging("WARNING")
    latency, follow = asyncio.run(measure(args))
    report = render(latency, follow, args.rows, args.authors)
    print(report)
    if not args.no_write:
        update_section("search_catch_up", report)
        update_claims(claims(latency, follow, args.rows), COMMAND)


if __name__ == "__main__":
    main()
