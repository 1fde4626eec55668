"""Test helpers shared across packages (not fixtures)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.conftest import Api

WORDS = (
    "alpha beta gamma delta kernel cache index shard vector query backup restore "
    "latency budget postgres mongo replica lease worker queue embed token chunk heading "
    "garden tomato basil harvest compost ferment bread flour yeast oven travel kyoto "
    "train ticket museum temple budget invoice ledger"
).split()


def paragraph(rng: random.Random, words: int = 60) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    return text[0].upper() + text[1:] + "."


def sectioned_note(n_sections: int, seed: int = 0, words: int = 60) -> str:
    """A note with `n_sections` h2 sections (some with h3 subsections), one paragraph each."""
    rng = random.Random(seed)
    parts = []
    for i in range(n_sections):
        level = "###" if i % 5 == 4 else "##"
        parts.append(f"{level} Section {i}\n\n{paragraph(rng, words)}\n")
    return "\n".join(parts)


async def wait_indexed(
    api: Api, headers: dict[str, str], note_id: str, timeout_s: float = 60.0
) -> dict[str, Any]:
    """Poll the note until it is indexed at its latest version (or fail loudly)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    note: dict[str, Any] = {}
    while loop.time() < deadline:
        note = (await api.client.get(f"/v1/notes/{note_id}", headers=headers)).json()
        if note.get("index_status") == "indexed" and (
            note["indexed_version"] == note["version"] or note["status"] == "trashed"
        ):
            return note
        if note.get("index_status") == "failed":
            raise AssertionError(f"indexing failed: {note.get('index_error')}")
        await asyncio.sleep(0.05)
    raise AssertionError(f"note not indexed within {timeout_s}s: {note}")


async def wait_evicted(db: Any, note_id: Any, timeout_s: float = 30.0) -> None:
    """Poll until the note's old chunk versions are gone: the worker clears `evict_pending`
    last, after the commit that `wait_indexed` already sees."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while (await db.notes.find_one({"_id": note_id}, {"evict_pending": 1})).get("evict_pending"):
        if loop.time() > deadline:
            raise AssertionError(f"eviction of note {note_id} not done within {timeout_s}s")
        await asyncio.sleep(0.02)


class RecordingEmbedder:
    """Wraps a real embedder and records every text it is asked to embed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.texts: list[str] = []
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def embed(self, texts: list[str], **kwargs: Any) -> Any:
        self.calls += 1
        self.texts.extend(texts)
        return await self.inner.embed(texts, **kwargs)


class GatedEmbedder(RecordingEmbedder):
    """Holds every embed call until `release` is set (`entered` tells it is waiting)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def embed(self, texts: list[str], **kwargs: Any) -> Any:
        self.entered.set()
        await self.release.wait()
        return await super().embed(texts, **kwargs)


def lease_lost_after_its_check(reconciler: Any) -> None:
    """Let the reconciler's runs pass the lease check before their write, as if the lease
    ran out just after it (a pause between the check and the write): the tests using this
    exercise what still guards that window, the fenced commit and `_drop_fenced`."""

    async def passes(*_: Any, **__: Any) -> bool:
        return True

    reconciler._may_replace = passes


def openai_indexing_settings(
    make_settings: Callable[..., Any], base_url: str, **defaults: Any
) -> Callable[..., Any]:
    """A settings factory for indexing through the OpenAI connector on the local stub
    (quick retries and back-off); `defaults`, then each call's overrides, on top."""

    def make(**overrides: Any) -> Any:
        return make_settings(
            **{
                "embedding_provider": "openai",
                "openai_api_key": "sk-test",
                "openai_base_url": base_url,
                "openai_max_retries": 3,
                "autonote_index_backoff_base_s": 0.05,
                "autonote_index_backoff_max_s": 0.1,
                **defaults,
                **overrides,
            }
        )

    return make


@dataclass
class RawResponse:
    """What `raw_post` saw: the status, the body sent back, and how often the app read
    the request body."""

    status: int
    body: bytes
    reads: int


async def raw_post(
    app: Any,
    path: str,
    headers: dict[str, str],
    body: bytes,
    content_type: bytes = b"application/json",
    on_read: Callable[[], None] | None = None,
) -> RawResponse:
    """POST `body` straight to the ASGI `app` (no HTTP client in between), counting the
    app's reads of the body (`on_read` is called at each)."""
    reads = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal reads
        reads += 1
        if on_read is not None:
            on_read()
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
        "query_string": b"", "client": ("203.0.113.9", 4321), "server": ("test", 80),
        "headers": [(b"content-type", content_type),
                    (b"content-length", str(len(body)).encode()),
                    *((k.lower().encode(), v.encode()) for k, v in headers.items())],
    }  # fmt: skip
    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return RawResponse(start["status"], payload, reads)
