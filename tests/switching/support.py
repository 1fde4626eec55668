"""Helpers of the blue/green re-indexing tests: a populated database, the searches to keep
answering, and waiting for a user's switch."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from bson import ObjectId

from tests.conftest import Api
from tests.helpers import sectioned_note, wait_indexed

TOPICS = ["kyoto temple", "garden tomato", "backup restore", "ledger invoice", "vector query"]
QUERIES = [*TOPICS, "bread flour yeast", "replica lease worker"]
MODES = ("hybrid", "vector", "keyword")


async def populate(api: Api, h: dict[str, str], notes: int, *, first: int = 0) -> list[str]:
    """`notes` notes of two sections each (random words of a small vocabulary, so every
    query finds several), all indexed."""
    ids = []
    for i in range(first, first + notes):
        body = {
            "title": f"Note {i}: {TOPICS[i % len(TOPICS)]}",
            "content_md": sectioned_note(2, seed=i, words=40),
        }
        r = await api.client.post("/v1/notes", json=body, headers=h)
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    for note_id in ids:
        await wait_indexed(api, h, note_id, timeout_s=180)
    return ids


Answers = dict[tuple[str, str], list[str]]


async def search_all(api: Api, h: dict[str, str]) -> tuple[Answers, list[dict[str, Any]]]:
    """Every query in every mode: the note ids found, and the responses."""
    found: Answers = {}
    bodies = []
    for query in QUERIES:
        for mode in MODES:
            r = await api.client.post(
                "/v1/search", json={"query": query, "mode": mode, "limit": 5}, headers=h
            )
            assert r.status_code == 200, r.text
            body = r.json()
            found[(query, mode)] = [hit["note_id"] for hit in body["results"]]
            bodies.append(body)
    return found, bodies


async def status(api: Api, h: dict[str, str]) -> dict[str, Any]:
    r = await api.client.get("/v1/index/status", headers=h)
    assert r.status_code == 200, r.text
    return r.json()


async def during_switch(
    api: Api,
    h: dict[str, str],
    check: Callable[[Answers, list[dict[str, Any]], dict[str, Any]], Awaitable[None] | None],
    *,
    timeout_s: float = 240.0,
) -> int:
    """Run `check(answers, responses, status)` over and over while the user's search still
    reads the previous generation; returns how many rounds ran before the switch."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    rounds = 0
    while True:
        before = await status(api, h)
        if not before["switching"]:
            return rounds
        answers, bodies = await search_all(api, h)
        after = await status(api, h)
        if not after["switching"] and not before["switching"]:
            return rounds
        if after["switching"]:  # the whole round read the previous generation
            outcome = check(answers, bodies, after)
            if outcome is not None:
                await outcome
            rounds += 1
        assert loop.time() < deadline, f"no switch within {timeout_s}s: {after}"
        await asyncio.sleep(0.05)


async def wait_old_generation_gone(db: Any, generation: str, timeout_s: float = 30.0) -> None:
    """Until every chunk is of `generation` and no note keeps a version for another."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        generations = await db.note_chunks.distinct("generation")
        served = await db.notes.count_documents({"served": {"$type": "object"}})
        if generations in ([generation], []) and served == 0:
            return
        assert loop.time() < deadline, (generations, served)
        await asyncio.sleep(0.1)


async def chunk_generations(db: Any, bodies: list[dict[str, Any]]) -> set[str]:
    """The generations of the chunks the search responses cite."""
    ids = {
        ObjectId(chunk_id)
        for body in bodies
        for hit in body["results"]
        for section in hit["matching_chunks"]
        for chunk_id in section["chunk_ids"]
    }
    docs = await db.note_chunks.find({"_id": {"$in": list(ids)}}, {"generation": 1}).to_list()
    assert len(docs) == len(ids), "a cited chunk is gone"
    return {d["generation"] for d in docs}
