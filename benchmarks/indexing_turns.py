"""A user's long notes against another user's one-line note: does a long run hand over?

Alice writes two long notes; the app's two worker loops (local ONNX model, embedded
database) start on them. A few seconds in, Bob writes a one-line note. Measured: how long
Bob's note takes from his write to its `indexed_at`, and how long Alice's notes take, with
the default (a run that has embedded for AUTONOTE_INDEX_TURN_S hands its worker to another
user's due note, `api.indexing.fairness.turn_over_check`) and with the baseline in the
same run: no hand-over (turns only between notes). Modes alternate over rounds, each in a
fresh database.

Reproduce: `.venv/bin/python -m benchmarks.indexing_turns` (writes the section
`indexing_turns` of docs/benchmarks/indexing.md and its claim row).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import uuid
from pathlib import Path
from typing import Any

from bson import ObjectId

from benchmarks.common import (
    Claim,
    code_revision,
    machine_note,
    markdown_table,
    update_claims,
    update_section,
)
from benchmarks.indexing_notes import generate_note
from benchmarks.service_harness import (
    alternating_rounds,
    bench_settings,
    drop_database,
    in_process_app,
    ratio,
    wait_until,
)

TURN_S = 10.0  # the default AUTONOTE_INDEX_TURN_S
MODES = (f"hand over after {TURN_S:.0f} s (default)", "no hand-over (baseline)")
COMMAND = "python -m benchmarks.indexing_turns"


async def _status(db: Any, oid: ObjectId) -> str | None:
    doc = await db.notes.find_one({"_id": oid}, {"index_status": 1})
    return doc and doc.get("index_status")


async def run_round(mongo_url: str, mode: str, sections: int, head_start_s: float) -> dict:
    """One round in a fresh database; times in seconds."""
    db_name = f"bench_turns_{uuid.uuid4().hex[:8]}"
    turn_s = TURN_S if mode == MODES[0] else 3600.0
    settings = bench_settings(
        mongo_url,
        db_name,
        Path(tempfile.mkdtemp()),
        autonote_index_workers=2,
        autonote_index_turn_s=turn_s,
    )
    try:
        async with in_process_app(settings) as running:
            db = running.container.db
            running.container.embedder.load()
            alice, bob = await running.new_user("alice"), await running.new_user("bob")
            long_ids = []
            for seed in (1, 2):
                body = {
                    "title": f"Handbook {seed}",
                    "content_md": generate_note(sections, seed=seed).render(),
                }
                r = await running.client.post("/v1/notes", json=body, headers=alice)
                r.raise_for_status()
                long_ids.append(ObjectId(r.json()["id"]))
            await wait_until(
                lambda: _both_indexing(db, long_ids),
                timeout_s=120,
                interval_s=0.2,
                what="both long notes claimed",
            )
            await asyncio.sleep(head_start_s)
            r = await running.client.post(
                "/v1/notes", json={"title": "Short", "content_md": "one line"}, headers=bob
            )
            r.raise_for_status()
            bob_id = ObjectId(r.json()["id"])
            bob_written = (await db.notes.find_one({"_id": bob_id}))["updated_at"]
            all_ids = [*long_ids, bob_id]
            await wait_until(
                lambda: _all_indexed(db, all_ids),
                timeout_s=1800,
                interval_s=0.5,
                what="all indexed",
            )
            docs = {d["_id"]: d for d in await db.notes.find({"_id": {"$in": all_ids}}).to_list()}
        bob_s = (docs[bob_id]["indexed_at"] - bob_written).total_seconds()
        alice_s = max((docs[i]["indexed_at"] - bob_written).total_seconds() for i in long_ids)
        chunks = sum(docs[i]["chunk_count"] for i in long_ids)
        return {"mode": mode, "bob": bob_s, "alice": alice_s, "chunks": chunks}
    finally:
        drop_database(mongo_url, db_name)


async def _both_indexing(db: Any, ids: list[ObjectId]) -> bool:
    return all([await _status(db, i) == "indexing" for i in ids])


async def _all_indexed(db: Any, ids: list[ObjectId]) -> bool:
    return all([await _status(db, i) == "indexed" for i in ids])


def _medians(rounds: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Per mode: medians of Bob's note and of Alice's notes (s)."""
    return {
        mode: (
            statistics.median(r["bob"] for r in rounds if r["mode"] == mode),
            statistics.median(r["alice"] for r in rounds if r["mode"] == mode),
        )
        for mode in MODES
    }


def claims(rounds: list[dict[str, Any]]) -> list[Claim]:
    """The claims-table row: Bob's note and Alice's notes against no hand-over."""
    med = _medians(rounds)
    (bob, alice), (base_bob, base_alice) = med[MODES[0]], med[MODES[1]]
    return [
        Claim(
            "indexing_turns",
            f"another user's one-line note, behind {rounds[0]['chunks']} chunks of long "
            f"notes: {bob:.1f} s vs {base_bob:.1f} s without hand-over "
            f"({ratio(bob, base_bob)}); the long notes took {ratio(alice, base_alice)} as long",
            bob < base_bob,
        )
    ]


def report(rounds: list[dict[str, Any]], sections: int, head_start_s: float) -> str:
    """The `indexing_turns` section."""
    med = _medians(rounds)
    base_bob, base_alice = med[MODES[1]]
    rows = [
        [
            mode,
            sum(r["mode"] == mode for r in rounds),
            f"{bob:.1f}",
            f"{alice:.1f}",
            ratio(bob, base_bob),
            ratio(alice, base_alice),
        ]
        for mode, (bob, alice) in med.items()
    ]
    table = markdown_table(
        [
            "long runs",
            "rounds",
            "Bob's note indexed s",
            "Alice's notes done s",
            "Bob ÷ baseline",
            "Alice ÷ baseline",
        ],
        rows,
    )
    chunks = rounds[0]["chunks"]
    setup = (
        f"Alice writes two long notes ({sections} sections each, {chunks} chunks in all); "
        f"the app's two worker loops (local ONNX model, embedded database) take both; "
        f"{head_start_s:.1f} s after both runs started, Bob writes a one-line note. Times are "
        "from Bob's write to each note's `indexed_at` (Alice's: the later of her two), "
        "medians over rounds; modes alternate, each round in a fresh database. *Baseline*: "
        "no hand-over (turns only between notes)."
    )
    revision = code_revision("api/indexing", "connectors/embeddings")
    return (
        "## Indexing: a long note hands its worker over\n\n"
        f"Reproduce: `{COMMAND}`. "
        f"{machine_note()} Code: {revision}.\n\n{setup}\n\n{table}\n"
    )


async def main_async(rounds: int, sections: int, head_start_s: float) -> list[dict[str, Any]]:
    return await alternating_rounds(
        MODES,
        rounds,
        lambda url, mode: run_round(url, mode, sections, head_start_s),
        lambda r: f"Bob {r['bob']:.1f} s, Alice {r['alice']:.1f} s",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sections", type=int, default=1200)
    parser.add_argument("--head-start", type=float, default=3.0, help="seconds before Bob")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    results = asyncio.run(main_async(args.rounds, args.sections, args.head_start))
    body = report(results, args.sections, args.head_start)
    print(body)
    if not args.no_write:
        update_section("indexing_turns", body)
        update_claims(claims(results), COMMAND)


if __name__ == "__main__":
    main()
