"""Search during a change of embedding model: blue/green against re-indexing in place.

    .venv/bin/python -m benchmarks.model_switch [--notes 500] [--delay 0.1]

`--notes` notes of one user are indexed with the local model on the embedded server; the
app is started again and every query is asked once in every mode (hybrid, vector,
keyword): the answers before the switch. The database is then copied twice and each copy
is switched to `text-embedding-3-small` (the real `openai` client against the repository's
local stub, `--delay` seconds per embedding request) by starting the app on it with two
in-process workers:

- *blue/green* (the default): the new index is built beside the old one, which serves
  search until the user's new index is complete;
- *in place* (`AUTONOTE_BLUE_GREEN=false`, the behaviour before index generations): each
  note is re-embedded over its old chunks, and the local index serves only chunks of the
  configured model.

From the moment the app has started until the user's search reads the new index, the user
searches without pause, one search at a time, cycling through the queries in every mode
(the status endpoint asked before and after each query's three searches: a round that
ends after the switch is not counted).
Each response is compared with the answer to the same query and mode before the switch:
*empty* (no result for a query that had results), *missed* (a note found before is
absent). Time to switch: from the app's start to the status endpoint's `switching: false`.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pymongo import MongoClient

from api.logging import configure_logging
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
    drop_database,
    embedded_server,
    in_process_app,
    ratio,
    wait_until,
)

COMMAND = "python -m benchmarks.model_switch"
MODES = ("hybrid", "vector", "keyword")
VOCABULARY = (
    "backup restore replica shard lease worker queue deploy rollback incident billing "
    "invoice ledger garden tomato basil harvest compost bread flour yeast oven travel kyoto "
    "train ticket museum temple kernel cache latency budget mongo vector token heading "
    "review audit release branch merge ticket sprint roadmap meeting agenda recipe"
).split()
QUERIES = [
    "backup restore",
    "replica lease",
    "deploy rollback",
    "billing invoice",
    "garden tomato",
    "bread yeast",
    "kyoto temple",
    "train ticket",
    "kernel cache",
    "release branch",
    "sprint meeting",
    "recipe oven",
]
LIMIT = 5

Answers = dict[tuple[str, str], list[str]]


def _note(i: int) -> dict[str, Any]:
    """A note of two or three sections of words from a small vocabulary (every query
    matches several notes)."""
    rng = random.Random(i)
    sections = []
    for s in range(2 + i % 2):
        words = " ".join(rng.choice(VOCABULARY) for _ in range(45))
        sections.append(f"## {rng.choice(VOCABULARY).title()} {s}\n\n{words.capitalize()}.")
    title = f"{rng.choice(VOCABULARY)} {rng.choice(VOCABULARY)} {i}"
    return {"title": title, "content_md": "\n\n".join(sections)}


async def _search(app: Any, h: dict[str, str], query: str, mode: str) -> list[str]:
    body = {"query": query, "mode": mode, "limit": LIMIT}
    r = await app.client.post("/v1/search", json=body, headers=h)
    if r.status_code != 200:
        raise RuntimeError(f"search failed: {r.status_code} {r.text[:300]}")
    return [hit["note_id"] for hit in r.json()["results"]]


async def _answers(app: Any, h: dict[str, str]) -> Answers:
    return {(q, m): await _search(app, h, q, m) for q in QUERIES for m in MODES}


async def _all_indexed(db: Any) -> bool:
    return await db.notes.count_documents({"index_status": {"$ne": "indexed"}}) == 0


async def populate(url: str, db_name: str, data: Path, notes: int) -> tuple[Any, Answers]:
    """The notes indexed with the local model; the user's headers and answers before."""
    settings = bench_settings(url, db_name, data, autonote_index_workers=2)
    async with in_process_app(settings) as app:
        h = await app.new_user()
        for start in range(0, notes, 25):
            batch = [_note(i) for i in range(start, min(notes, start + 25))]
            replies = await asyncio.gather(
                *(app.client.post("/v1/notes", json=n, headers=h) for n in batch)
            )
            assert all(r.status_code == 201 for r in replies), replies[0].text
        await wait_until(
            lambda: _all_indexed(app.container.db), timeout_s=1800, interval_s=0.5, what="index"
        )
    # The answers of an app started on the indexed database, as the switch's app starts:
    # notes of equal score rank in the order the index was loaded in.
    async with in_process_app(settings) as app:
        return h, await _answers(app, h)


def copy_database(url: str, source: str, target: str) -> None:
    """Every document of `source` into a fresh `target` (indexes come with the app)."""
    client: MongoClient = MongoClient(url)
    try:
        client.drop_database(target)
        for name in client[source].list_collection_names():
            docs = client[source][name].find().to_list()
            if docs:
                client[target][name].insert_many(docs)
    finally:
        client.close()


@dataclass
class Arm:
    """One way of switching: what the user's searches saw until the switch."""

    name: str
    searches: int = 0
    seconds: float = 0.0
    compared: int = 0  # searches of queries that had results before
    empty: int = 0
    missed: int = 0
    # mode → [compared, empty, missed]
    by_mode: dict[str, list[int]] = field(default_factory=dict)
    switch_s: float = 0.0
    tokens_embedded: int = 0
    after_empty: int = 0  # queries with results before and none after the switch

    def observe(self, mode: str, before: list[str], now: list[str]) -> None:
        self.searches += 1
        if not before:
            return
        self.compared += 1
        counts = self.by_mode.setdefault(mode, [0, 0, 0])
        counts[0] += 1
        if not now:
            self.empty += 1
            counts[1] += 1
        if set(before) - set(now):
            self.missed += 1
            counts[2] += 1

    @property
    def rate(self) -> float:
        return self.searches / self.seconds if self.seconds else 0.0

    def empty_share(self) -> float:
        return self.empty / self.compared if self.compared else 0.0

    def missed_share(self) -> float:
        return self.missed / self.compared if self.compared else 0.0


async def _status(app: Any, h: dict[str, str]) -> dict[str, Any]:
    r = await app.client.get("/v1/index/status", headers=h)
    if r.status_code != 200:
        raise RuntimeError(f"status failed: {r.status_code} {r.text[:300]}")
    return r.json()


async def switch(
    url: str, db_name: str, data: Path, stub: Any, h: dict[str, str], before: Answers, name: str
) -> Arm:
    """Start the app on `db_name` with the OpenAI model; search until the switch."""
    settings = bench_settings(
        url,
        db_name,
        data,
        embedding_provider="openai",
        openai_api_key="sk-bench",
        openai_base_url=stub.base_url,
        autonote_index_workers=2,
        autonote_blue_green=name == "blue/green",
    )
    arm = Arm(name)
    started = time.perf_counter()
    async with in_process_app(settings) as app:
        searching = time.perf_counter()
        i = 0
        while (await _status(app, h))["switching"]:
            query = QUERIES[i % len(QUERIES)]
            i += 1
            round_ = [(mode, await _search(app, h, query, mode)) for mode in MODES]
            if not (await _status(app, h))["switching"]:
                break  # some of this round may have read the new index: not counted
            for mode, found in round_:
                arm.observe(mode, before[(query, mode)], found)
        arm.seconds = time.perf_counter() - searching
        arm.switch_s = time.perf_counter() - started
        status = await _status(app, h)
        arm.tokens_embedded = status["tokens_embedded"]
        after = await _answers(app, h)
        arm.after_empty = sum(1 for k, v in after.items() if before[k] and not v)
    return arm


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "—"


def report(arms: list[Arm], notes: int, delay: float, populate_s: float) -> str:
    base = next(a for a in arms if a.name == "in place")
    rows = []
    for arm in arms:
        modes = []
        for m in MODES:
            compared, empty, missed = arm.by_mode.get(m, [0, 0, 0])
            modes.append(f"{m} {_pct(empty, compared)} / {_pct(missed, compared)}")
        rows.append(
            [
                arm.name,
                arm.searches,
                f"{arm.rate:.1f}",
                ratio(arm.rate, base.rate),
                f"{arm.empty} ({_pct(arm.empty, arm.compared)})",
                f"{arm.missed} ({_pct(arm.missed, arm.compared)})",
                "; ".join(modes),
                f"{arm.switch_s:.1f}",
                ratio(arm.switch_s, base.switch_s),
                arm.after_empty,
            ]
        )
    table = markdown_table(
        [
            "switch",
            "searches",
            "searches/s",
            "÷ in place",
            "empty (of queries with results before)",
            "missed a note found before",
            "empty / missed by mode",
            "time to switch s",
            "÷ in place",
            "queries empty after the switch",
        ],
        rows,
    )
    return "\n".join(
        [
            "## Search during a change of embedding model",
            "",
            f"Reproduce: `.venv/bin/python -m benchmarks.model_switch --notes {notes} "
            f"--delay {delay}`. {machine_note()} Code: {code_revision('api', 'benchmarks')}.",
            "",
            f"One user, {notes} notes (two or three sections each) indexed with the local "
            f"model in {populate_s:.0f} s, then switched to `text-embedding-3-small@1536` "
            f"(OpenAI client against the local stub, {delay} s per embedding request, two "
            f"in-process workers), each arm on its own copy of the database. The user searches "
            f"one query at a time from the app's start until the switch ({len(QUERIES)} "
            f"queries × {len(MODES)} modes, limit {LIMIT}, query vectors cached after their "
            "first use); each response is compared with the same query's answer before the "
            "switch. *in place* is `AUTONOTE_BLUE_GREEN=false`: each note is re-embedded over "
            "its old chunks and served once its new vectors are written.",
            "",
            table,
        ]
    )


def claim(arms: list[Arm], notes: int) -> Claim:
    green = next(a for a in arms if a.name == "blue/green")
    base = next(a for a in arms if a.name == "in place")
    result = (
        f"{notes} notes, local model → text-embedding-3-small: {green.empty} of "
        f"{green.compared} searches empty, {green.missed} missed a note found before "
        f"({green.rate:.0f} searches/s; switched in {green.switch_s:.0f} s); in place: "
        f"{_pct(base.empty, base.compared)} empty, {_pct(base.missed, base.compared)} missed "
        f"({base.rate:.0f} searches/s, {ratio(green.rate, base.rate)}; re-indexed in "
        f"{base.switch_s:.0f} s, {ratio(green.switch_s, base.switch_s)})"
    )
    return Claim("model_switch", result, passed=green.empty == 0 and green.compared > 0)


async def run(notes: int, delay: float) -> tuple[list[Arm], float]:
    from tests.stubs.fixtures import StubServer

    with embedded_server() as url, tempfile.TemporaryDirectory(prefix="bench-switch-") as tmp:
        data = Path(tmp)
        started = time.perf_counter()
        h, before = await populate(url, "bench_switch_src", data / "src", notes)
        populate_s = time.perf_counter() - started
        print(f"populated {notes} notes in {populate_s:.0f} s", flush=True)
        arms = []
        with StubServer() as stub:
            stub.set_delay(delay)
            for name in ("blue/green", "in place"):
                db_name = f"bench_switch_{name.replace('/', '_').replace(' ', '_')}"
                copy_database(url, "bench_switch_src", db_name)
                arm = await switch(url, db_name, data / db_name, stub, h, before, name)
                print(
                    f"{name}: {arm.searches} searches, {arm.rate:.1f}/s, empty {arm.empty}, "
                    f"missed {arm.missed} of {arm.compared}, switched in {arm.switch_s:.1f} s",
                    flush=True,
                )
                arms.append(arm)
                drop_database(url, db_name)
        drop_database(url, "bench_switch_src")
    return arms, populate_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=500, help="notes to switch (500)")
    parser.add_argument(
        "--delay", type=float, default=0.1, help="seconds per embedding request (0.1)"
    )
    args = parser.parse_args()
    configure_logging("WARNING", True)
    arms, populate_s = asyncio.run(run(args.notes, args.delay))
    update_section("model_switch", report(arms, args.notes, args.delay, populate_s))
    update_claims([claim(arms, args.notes)], COMMAND)


if __name__ == "__main__":
    main()
