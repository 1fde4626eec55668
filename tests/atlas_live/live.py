"""Helpers of the live Atlas suite: polling, and search requests checked on every response.

Atlas Search and Vector Search indexes follow `note_chunks` through its change stream, so a
note that reads `indexed` reaches search a moment later (typically under a second, longer on
a busy cluster). Tests therefore poll with a deadline (`eventually`) and assert on results,
never on times and never after a fixed sleep. What must hold at every moment (the backend,
no note twice in one response, one version per note, nothing outside the allowed notes) is
asserted on every response, including those polled before the index caught up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from tests.conftest import Api
from tests.helpers import wait_indexed

MODES = ("hybrid", "vector", "keyword")
BACKEND = "atlas"
# Bound on any one catch-up: index lag is normally well under a second.
CATCH_UP_S = 120.0


async def eventually(
    predicate: Callable[[], Awaitable[bool]],
    timeout_s: float = CATCH_UP_S,
    *,
    what: Callable[[], str] | None = None,
) -> None:
    """Poll `predicate` (0.2 s doubling to 2 s between tries) until it returns True; after
    `timeout_s`, AssertionError with `what()` (the last observation). An AssertionError the
    predicate raises, an invariant broken, fails at once: it is not retried."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    delay = 0.2
    while not await predicate():
        remaining = deadline - loop.time()
        if remaining <= 0:
            detail = what() if what is not None else getattr(predicate, "__qualname__", "")
            raise AssertionError(f"not true within {timeout_s:g}s: {detail}")
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, 2.0)


async def add_note(
    api: Api, headers: dict[str, str], title: str, content: str, tags: list[str] | None = None
) -> dict[str, Any]:
    """Create a note and wait until the app has indexed it (search may still lag)."""
    r = await api.client.post(
        "/v1/notes",
        json={"title": title, "content_md": content, "tags": tags or []},
        headers=headers,
    )
    assert r.status_code == 201, r.text
    return await wait_indexed(api, headers, r.json()["id"], timeout_s=CATCH_UP_S)


async def edit_note(
    api: Api, headers: dict[str, str], note_id: str, **fields: Any
) -> dict[str, Any]:
    """PATCH the note and wait until the app has indexed the new version."""
    r = await api.client.patch(f"/v1/notes/{note_id}", json=fields, headers=headers)
    assert r.status_code == 200, r.text
    note = await wait_indexed(api, headers, note_id, timeout_s=CATCH_UP_S)
    assert note["indexed_version"] == r.json()["version"], note
    return note


async def search(
    api: Api,
    headers: dict[str, str],
    query: str,
    *,
    mode: str,
    filters: dict[str, Any] | None = None,
    limit: int = 10,
) -> dict[str, Any]:
    """POST /v1/search; asserts what holds at every moment: served by Atlas in the mode
    asked, no note twice, and each note's sections from one version of it."""
    body: dict[str, Any] = {"query": query, "mode": mode, "limit": limit}
    if filters is not None:
        body["filters"] = filters
    r = await api.client.post("/v1/search", json=body, headers=headers)
    assert r.status_code == 200, r.text
    out = r.json()
    assert (out["backend"], out["mode"], out["warning"]) == (BACKEND, mode, None), out
    ids = [result["note_id"] for result in out["results"]]
    assert len(ids) == len(set(ids)), f"a note twice in one response: {ids}"
    for result in out["results"]:
        versions = {section["note_version"] for section in result["matching_chunks"]}
        assert len(versions) == 1, f"note {result['note_id']} mixes versions {versions}"
    return out


def note_ids(out: dict[str, Any]) -> set[str]:
    return {result["note_id"] for result in out["results"]}


async def expect_notes(
    api: Api,
    headers: dict[str, str],
    query: str,
    expected: Collection[str],
    *,
    filters: dict[str, Any] | None = None,
    modes: Collection[str] = MODES,
) -> None:
    """In each mode the results become exactly `expected`, and no response on the way
    holds a note outside it (the user's other notes, another user's, a filtered-out one).
    Every note of `expected` must match `query` in every mode asked."""
    for mode in modes:
        await _expect_notes_in(api, headers, query, set(expected), mode=mode, filters=filters)


async def _expect_notes_in(
    api: Api,
    headers: dict[str, str],
    query: str,
    expected: set[str],
    *,
    mode: str,
    filters: dict[str, Any] | None,
) -> None:
    seen: list[set[str]] = [set()]

    async def exactly_expected() -> bool:
        found = note_ids(await search(api, headers, query, mode=mode, filters=filters))
        outside = found - expected
        assert not outside, f"mode={mode} filters={filters}: notes outside {expected}: {outside}"
        seen[0] = found
        return found == expected

    await eventually(
        exactly_expected,
        what=lambda: f"mode={mode} filters={filters}: found {seen[0]}, expected {expected}",
    )
