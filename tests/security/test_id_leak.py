"""Ids a user sees carry nothing about other users' activity."""

from __future__ import annotations

import itertools

from bson import ObjectId

from api.db.ids import new_object_id
from tests.conftest import Api
from tests.helpers import sectioned_note, wait_indexed


def test_new_ids_keep_the_second_and_share_no_counter() -> None:
    before = ObjectId().generation_time
    ids = [new_object_id() for _ in range(1000)]
    after = ObjectId().generation_time
    assert len(set(ids)) == 1000
    tails = [int.from_bytes(i.binary[-3:], "big") for i in ids]
    steps = {b - a for a, b in itertools.pairwise(tails)}
    assert len(steps) > 900  # the driver's ids step by exactly 1
    assert all(before <= i.generation_time <= after for i in ids)  # the second they were made


async def test_the_gap_between_two_of_bobs_ids_does_not_count_alices_chunks(api: Api) -> None:
    """Note ids came from the driver's per-process counter, which every chunk the indexer
    wrote for any user also advanced: Bob's id gap minus 2 was Alice's chunk_count. Ids of
    notes and chunks are random past their timestamp now."""
    alice, bob = await api.new_user("alice"), await api.new_user("bob")

    async def bob_note() -> int:
        body = {"title": "p", "content_md": ""}
        note = (await api.client.post("/v1/notes", json=body, headers=bob)).json()
        return int(note["id"][-6:], 16)

    gaps, counts = [], []
    for n in (6, 9, 12):
        first = await bob_note()
        body = {"title": "A", "content_md": sectioned_note(n)}
        note = (await api.client.post("/v1/notes", json=body, headers=alice)).json()
        counts.append((await wait_indexed(api, alice, note["id"]))["chunk_count"])
        gaps.append(await bob_note() - first - 2)
    assert min(counts) >= 3
    assert gaps != counts, (gaps, counts)
    chunk_ids = [c["_id"] async for c in api.container.db.note_chunks.find({}, {"_id": 1})]
    tails = sorted(int.from_bytes(c.binary[-3:], "big") for c in chunk_ids)
    assert len(chunk_ids) >= 3 and tails[-1] - tails[0] > len(tails) * 100
