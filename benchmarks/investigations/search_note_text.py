"""Search's read of note text for merged sections: windows against whole notes.

When two hits of one note share a section, search cuts the merged citation from the note's
text, asking the server for windows of at most `max_section_chars` after each hit
(`NotesSearchQueries.text_windows`, `$substrCP`) instead of the whole `content_md` (up to
2 MB). This script stores long notes in the embedded server and times both reads of the
same notes, in the same run:

- *windows (ours)*: `text_windows` with two 6 000-character windows per note, the size
  `section_windows` asks for around a merged run;
- *whole notes (baseline)*: `find` with `content_md` projected.

Reported: the median time of one read (interleaved rounds), the wall time of 16 reads at
once, the characters that reach the API process, and the embedded server's resident memory
after the concurrent reads (it grows with what it has to serialise).

Reproduce: `.venv/bin/python -m benchmarks.investigations.search_note_text` (`--no-write`
to only print; the report goes to benchmarks/.data/investigations.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

import psutil
from bson import ObjectId
from pymongo import AsyncMongoClient

from api.db.client import create_client
from api.notes.repository import NotesSearchQueries
from api.notes.stored import STATUS_QUERY
from api.retrieval.grouping import DEFAULT_MAX_SECTION_CHARS
from benchmarks.common import (
    code_revision,
    machine_note,
    markdown_table,
    set_offline_env,
    update_section,
)
from benchmarks.service_harness import embedded_mongo

MODES = ("windows (ours)", "whole notes (baseline)")
_WORDS = "backup restore cluster replica index chunk vector search note heading".split()


def _note_text(rng: random.Random, chars: int) -> str:
    lines, size = [], 0
    while size < chars:
        line = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 30)))
        lines.append(line)
        size += len(line) + 2
    return "\n\n".join(lines)


@contextlib.asynccontextmanager
async def _stored_notes(notes: int, note_chars: int) -> AsyncIterator[tuple[Any, dict[str, Any]]]:
    """A fresh embedded server holding `notes` long notes; yields (server process, reads)."""
    with embedded_mongo() as server:
        assert server.process is not None
        client = create_client(server.url)
        try:
            yield psutil.Process(server.process.pid), await _reads(client, notes, note_chars)
        finally:
            await client.close()


async def _reads(client: AsyncMongoClient, notes: int, note_chars: int) -> dict[str, Any]:
    """Store the notes; the two reads of them, by mode."""
    db = client["bench_note_text"]
    rng = random.Random(7)
    author = ObjectId()
    ids = [ObjectId() for _ in range(notes)]
    for note_id in ids:
        await db.notes.insert_one(
            {
                "_id": note_id,
                "author_id": author,
                "status": "active",
                "version": 1,
                "content_version": 1,
                "content_md": _note_text(rng, note_chars),
            }
        )
    queries = NotesSearchQueries(db)
    width = DEFAULT_MAX_SECTION_CHARS
    windows = {
        n: sorted((s, s + width) for s in rng.sample(range(0, note_chars - width), 2)) for n in ids
    }

    async def ours() -> int:
        docs = await queries.text_windows(author, windows)
        return sum(len(t) for d in docs for t in d["windows"])

    async def baseline() -> int:
        cursor = db.notes.find(
            {"_id": {"$in": ids}, "author_id": author, "status": STATUS_QUERY["active"]},
            {"content_md": 1, "version": 1, "content_version": 1},
        )
        return sum(len(d["content_md"]) for d in await cursor.to_list())

    return {MODES[0]: ours, MODES[1]: baseline}


async def measure(notes: int, note_chars: int, rounds: int, concurrent: int) -> dict[str, Any]:
    """Interleaved single reads in one server; then, per mode in a fresh server, `concurrent`
    reads at once and the server's memory growth over them."""
    times: dict[str, list[float]] = {m: [] for m in MODES}
    result: dict[str, dict[str, float]] = {m: {} for m in MODES}
    async with _stored_notes(notes, note_chars) as (_proc, reads):
        for r in range(rounds):
            for mode in MODES if r % 2 == 0 else MODES[::-1]:
                started = time.perf_counter()
                result[mode]["chars"] = await reads[mode]()
                times[mode].append(time.perf_counter() - started)
    for mode in MODES:
        async with _stored_notes(notes, note_chars) as (proc, reads):
            before = proc.memory_info().rss
            started = time.perf_counter()
            await asyncio.gather(*(reads[mode]() for _ in range(concurrent)))
            result[mode]["concurrent_ms"] = (time.perf_counter() - started) * 1000
            result[mode]["rss_growth_mb"] = (proc.memory_info().rss - before) / 2**20
        result[mode]["median_ms"] = statistics.median(times[mode]) * 1000
    return result


def render(result: dict[str, Any], notes: int, note_chars: int, rounds: int, n: int) -> str:
    """The investigation's report."""
    base = result[MODES[1]]
    rows = [
        [
            mode,
            f"{m['median_ms']:.1f}",
            f"{m['median_ms'] / base['median_ms']:.2f}×",
            f"{m['concurrent_ms']:.0f}",
            f"{m['concurrent_ms'] / base['concurrent_ms']:.2f}×",
            f"{m['chars']:,.0f}",
            f"{m['rss_growth_mb']:.0f}",
            f"{m['rss_growth_mb'] / base['rss_growth_mb']:.2f}×",
        ]
        for mode, m in ((mode, result[mode]) for mode in MODES)
    ]
    table = markdown_table(
        [
            "read",
            "one read, median ms",
            "÷ baseline",
            f"{n} at once, wall ms",
            "÷ baseline",
            "characters to the API",
            "server RSS growth, MB",
            "÷ baseline",
        ],
        rows,
    )
    return (
        "## Search: note text for merged sections\n\n"
        "Reproduce: `.venv/bin/python -m benchmarks.investigations.search_note_text`. "
        f"{machine_note()} Code: {code_revision('api/notes/repository.py')}.\n\n"
        f"{notes} notes of {note_chars:,} characters in the embedded server, all read at "
        "once, as for a search whose results hold that many notes with two hits in one "
        f"section. One read: median of {rounds} interleaved rounds. At once: {n} such "
        "reads together, each mode in a fresh server, whose resident memory growth over "
        "them is shown. *windows*: two "
        f"{DEFAULT_MAX_SECTION_CHARS:,}-character windows per note (`text_windows`); "
        "*whole notes*: the whole `content_md` projected. On mongod, "
        "`$substrCP` counts code points from the string's start to each window, so a "
        "window costs up to one pass over the note there, which this server (it slices) "
        "does not show; search asks for at most `MAX_WINDOWS` (4) windows per note.\n\n"
        f"{table}\n"
    )


def main(argv: list[str] | None = None) -> None:
    """Measure, print, and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=10)
    parser.add_argument("--note-chars", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--concurrent", type=int, default=16)
    parser.add_argument("--no-write", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    set_offline_env()
    result = asyncio.run(measure(args.notes, args.note_chars, args.rounds, args.concurrent))
    report = render(result, args.notes, args.note_chars, args.rounds, args.concurrent)
    print(report)
    if not args.no_write:
        update_section("search_note_text", report)


if __name__ == "__main__":
    main()
