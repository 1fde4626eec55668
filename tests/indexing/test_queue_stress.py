"""Randomized (seeded) stress of the durable indexing queue: concurrent edits, trash/restore,
racing reconcilers (workers + parallel run_once + a second Reconciler), faults (stub delays
and 5xx, AutoReconnect from extend_lease / complete, leases expired mid-run), then settle
and check every note's index invariants.

On demand (marked slow, ~1 min per seed): `make test-slow`, or
`STRESS_SEEDS="1,2,3" .venv/bin/pytest -m slow tests/indexing/test_queue_stress.py`
(also STRESS_NOTES per user, STRESS_USERS, STRESS_MAX_ATTEMPTS, STRESS_CANCEL_P,
STRESS_SLOW_P, STRESS_CHAOS_GAP). The seed fixes the edits and faults, not how the tasks
interleave."""

from __future__ import annotations

import asyncio
import os
import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pymongo.errors import AutoReconnect

from api.indexing.reconciler import Reconciler
from tests.conftest import running_app
from tests.helpers import openai_indexing_settings, sectioned_note

SEEDS = [int(s) for s in os.environ.get("STRESS_SEEDS", "1").split(",")]
SECONDS = float(os.environ.get("STRESS_SECONDS", "30"))
NOTES_PER_USER = int(os.environ.get("STRESS_NOTES", "4"))
USERS = int(os.environ.get("STRESS_USERS", "3"))
MAX_ATTEMPTS = int(os.environ.get("STRESS_MAX_ATTEMPTS", "5"))
CANCEL_P = float(os.environ.get("STRESS_CANCEL_P", "0"))
SLOW_P = float(os.environ.get("STRESS_SLOW_P", "0"))
CHAOS_GAP = float(os.environ.get("STRESS_CHAOS_GAP", "1.2"))


class Faults:
    """Random AutoReconnect on queue methods, decided by a seeded rng, while `on`."""

    def __init__(self, rng: random.Random, log: list[str]) -> None:
        self.rng = rng
        self.on = True
        self.log = log
        self.counts: Counter[str] = Counter()

    def patch(self, queue: Any, name: str, p: float, who: str) -> None:
        real = getattr(queue, name)

        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            if self.on and self.rng.random() < p:
                after = self.rng.random() < 0.5
                self.counts[f"{who}.{name}.{'after' if after else 'before'}"] += 1
                self.log.append(
                    f"fault {who}.{name} AutoReconnect {'after' if after else 'before'} {args[0]}"
                )
                if after:
                    await real(*args, **kwargs)
                raise AutoReconnect(f"injected ({name})")
            return await real(*args, **kwargs)

        setattr(queue, name, wrapped)


def content_for(rng: random.Random) -> str:
    return sectioned_note(rng.randint(1, 7), seed=rng.randint(0, 6), words=rng.randint(8, 30))


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
async def test_queue_stress(seed: int, make_settings: Any, openai_stub: Any) -> None:
    rng = random.Random(seed)
    events: list[str] = []
    settings = openai_indexing_settings(make_settings, openai_stub.base_url)(
        openai_max_retries=2,
        autonote_index_workers=2,
        autonote_index_lease_s=1.5,
        autonote_index_backoff_max_s=0.2,
        autonote_index_poll_s=0.05,
        autonote_index_stop_grace_s=5.0,
        autonote_index_max_attempts=MAX_ATTEMPTS,
        log_level="ERROR",
    )
    async with running_app(settings) as api:
        db = api.container.db
        rec = api.container.indexing.reconciler
        workers = api.container.indexing.workers
        other = Reconciler(
            rec.db,
            chunker=rec.chunker,
            embedder=rec.embedder,
            model_key=rec.model_key,
            config=rec.config,
        )
        faults = Faults(random.Random(seed * 7919), events)
        for who, q in (("A", rec.queue), ("B", other.queue)):
            faults.patch(q, "extend_lease", 0.15, who)
            faults.patch(q, "complete", 0.05, who)

        srng = random.Random(seed * 17)

        def slow(obj: Any, name: str, who: str) -> None:
            real = getattr(obj, name)

            async def wrapped(*args: Any, **kwargs: Any) -> Any:
                if faults.on and srng.random() < SLOW_P:
                    d = srng.uniform(0.2, 2.0)
                    faults.counts[f"{who}.{name}.slow"] += 1
                    await asyncio.sleep(d)
                return await real(*args, **kwargs)

            setattr(obj, name, wrapped)

        for who, r_ in (("A", rec), ("B", other)):
            for m in (
                "insert_version",
                "delete_version",
                "delete_ids",
                "for_note",
                "delete_older_versions",
            ):
                slow(r_.chunks, m, who)
            slow(r_.queue, "holding", who)

        users = [await api.new_user(f"u{i}") for i in range(USERS)]
        notes: list[tuple[dict[str, str], str]] = []
        for h in users:
            for _ in range(NOTES_PER_USER):
                r = await api.client.post(
                    "/v1/notes",
                    json={"title": f"T{rng.randint(0, 3)}", "content_md": content_for(rng)},
                    headers=h,
                )
                assert r.status_code == 201, r.text
                notes.append((h, r.json()["id"]))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SECONDS
        outcomes: Counter[str] = Counter()

        async def editor(k: int) -> None:
            erng = random.Random(seed * 1000 + k)
            while loop.time() < deadline:
                h, nid = erng.choice(notes)
                op = erng.random()
                url = f"/v1/notes/{nid}"
                if op < 0.45:
                    r = await api.client.patch(
                        url, json={"content_md": content_for(erng)}, headers=h
                    )
                elif op < 0.65:
                    r = await api.client.patch(
                        url, json={"title": f"T{erng.randint(0, 3)}"}, headers=h
                    )
                elif op < 0.8:
                    r = await api.client.delete(url, headers=h)
                else:
                    r = await api.client.post(f"{url}/restore", headers=h)
                events.append(f"edit{k} {op:.2f} {nid} -> {r.status_code}")
                await asyncio.sleep(erng.uniform(0.05, 0.6))

        async def runner(r: Reconciler, name: str) -> None:
            rrng = random.Random(sum(map(ord, name)) * 1000 + seed)
            while loop.time() < deadline:
                try:
                    if rrng.random() < CANCEL_P:  # a shutdown cancels the run mid-way
                        t = rrng.uniform(0.05, 2.0)
                        try:
                            out = await asyncio.wait_for(r.run_once(), t)
                        except TimeoutError:
                            outcomes[f"{name}:cancelled"] += 1
                            events.append(f"{name} cancelled after {t:.2f}s")
                            continue
                    else:
                        out = await r.run_once()
                except Exception as exc:  # a run_once raising is itself notable
                    outcomes[f"{name}:raised:{type(exc).__name__}"] += 1
                    events.append(f"{name} raised {exc!r}")
                    await asyncio.sleep(0.1)
                    continue
                if out is None:
                    await asyncio.sleep(0.05)
                else:
                    outcomes[f"{name}:{out.status}"] += 1

        async def chaos() -> None:
            crng = random.Random(seed * 31)
            while loop.time() < deadline:
                await asyncio.sleep(crng.uniform(0.1, CHAOS_GAP))
                x = crng.random()
                if x < 0.35:
                    d, n = crng.uniform(0.5, 3.0), crng.randint(1, 3)
                    openai_stub.set_delay(d, count=n)
                    events.append(f"chaos delay {d:.1f}s x{n}")
                elif x < 0.55:
                    n = crng.randint(1, 4)
                    openai_stub.fail_next(
                        crng.choice([500, 502, 503]),
                        count=n,
                        retry_after=0.05,
                        path="/v1/embeddings",
                    )
                    events.append(f"chaos 5xx x{n}")
                else:
                    busy = await db.notes.find({"lease_token": {"$ne": None}}, {"_id": 1}).to_list()
                    if busy:
                        victim = crng.choice(busy)["_id"]
                        past = datetime.now(UTC) - timedelta(seconds=1)
                        await db.notes.update_one(
                            {"_id": victim}, {"$set": {"lease_expires_at": past}}
                        )
                        events.append(f"chaos expire lease {victim}")

        tasks = [asyncio.create_task(editor(k)) for k in range(3)]
        tasks += [asyncio.create_task(runner(rec, f"A{i}")) for i in range(2)]
        tasks += [asyncio.create_task(runner(other, f"B{i}")) for i in range(2)]
        tasks.append(asyncio.create_task(chaos()))
        await asyncio.gather(*tasks)

        # ---- settle ----------------------------------------------------------------------
        faults.on = False
        openai_stub.set_delay(0.0)
        embed_reqs = openai_stub.requests_to("/v1/embeddings")
        n_embed_during = len(embed_reqs)
        texts_during = sum(len(r.body.get("input", [])) for r in embed_reqs)
        settle_deadline = loop.time() + 60
        while loop.time() < settle_deadline:
            await workers.maintenance_once()
            while (await rec.run_once()) is not None or (await other.run_once()) is not None:
                pass
            open_ = await db.notes.count_documents(
                {
                    "$or": [
                        {"index_status": {"$in": ["pending", "indexing"]}},
                        {"lease_token": {"$ne": None}},
                        {"evict_pending": True},
                    ]
                }
            )
            if open_ == 0:
                break
            await asyncio.sleep(0.3)
        await workers.stop()
        await workers.maintenance_once()
        while (await rec.run_once()) is not None:
            pass
        final_embed = openai_stub.requests_to("/v1/embeddings")

        # ---- check -----------------------------------------------------------------------
        problems: list[str] = []
        all_docs = await db.notes.find({}).to_list()
        by_id = {d["_id"]: d for d in all_docs}
        for chunk in await db.note_chunks.find({}, {"embedding": 0}).to_list():
            owner = by_id.get(chunk["note_id"])
            if owner is None:
                problems.append(f"chunk {chunk['_id']} of missing note {chunk['note_id']}")
            elif owner["author_id"] != chunk["author_id"]:
                problems.append(f"chunk {chunk['_id']} author differs from note {owner['_id']}")
        for note in all_docs:
            oid = note["_id"]
            st = {
                k: note.get(k)
                for k in (
                    "status",
                    "version",
                    "index_status",
                    "indexed_version",
                    "chunk_count",
                    "index_attempts",
                    "lease_token",
                    "lease_expires_at",
                    "next_attempt_at",
                    "index_error",
                    "evict_pending",
                )
            }
            chunks = (
                await db.note_chunks.find({"note_id": oid}, {"embedding": 0})
                .sort([("note_version", 1), ("chunk_index", 1)])
                .to_list()
            )
            versions = sorted({c["note_version"] for c in chunks})
            if note["index_status"] not in ("indexed", "failed"):
                problems.append(f"{oid} stuck: {st}")
                continue
            if note["index_status"] == "failed":
                if not note.get("index_error"):
                    problems.append(f"{oid} failed without error: {st}")
                if chunks and versions != [note.get("indexed_version")]:
                    problems.append(f"{oid} failed with chunk versions {versions}: {st}")
                continue
            if note["status"] == "trashed":
                if chunks:
                    problems.append(f"{oid} trashed with {len(chunks)} chunks v{versions}: {st}")
                continue
            if note.get("indexed_version") != note.get("version"):
                problems.append(f"{oid} indexed_version != version: {st}")
            if versions != [note.get("indexed_version")]:
                problems.append(f"{oid} chunk versions {versions}: {st}")
            live = [c for c in chunks if c["note_version"] == note.get("indexed_version")]
            if len(live) != note.get("chunk_count"):
                problems.append(f"{oid} {len(live)} chunks != chunk_count: {st}")
            want = [
                c.content_hash for c in rec.chunker.chunk_note(note["content_md"], note["title"])
            ]
            if [c["content_hash"] for c in live] != want:
                problems.append(f"{oid} chunk hashes differ from chunker output: {st}")
        summary = (
            f"seed={seed} notes={len(all_docs)} embed_requests during={n_embed_during} "
            f"(texts {texts_during}) total={len(final_embed)} outcomes={dict(outcomes)} "
            f"faults={dict(faults.counts)} events={len(events)}"
        )
        print(summary)
        if problems:
            tail = "\n".join(events[-60:])
            pytest.fail(summary + "\n" + "\n".join(problems) + "\n--- last events ---\n" + tail)
