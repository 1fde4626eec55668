"""Which in-process index each user's search reads while a new generation is built.

The configured generation has its `LocalIndex`; each older generation some user still reads
(their new index is not complete yet) has one more, holding only those users' notes. A
user's pointer moves to the configured index in one assignment, atomic for readers: a
search picks its `Serving` once and runs on it, and the old index keeps the user's
partition for `grace_s` more so a search that picked it just before finishes there.

`version_for` is the rule for what each index holds of a note.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

import structlog

from api.indexing.generation import note_generation
from api.notes.stored import note_status
from api.providers import model_dimensions
from api.retrieval.local.index import LocalIndex

log = structlog.get_logger(__name__)

# How long a user's old index stays after their switch, for searches that picked it.
SWITCH_GRACE_S = 60.0


@dataclass(frozen=True, slots=True)
class Serving:
    """One generation's index: what a search of a user reading it runs on."""

    generation: str | None  # None: not tracked (an index loaded without generations)
    model_key: str  # the model its vectors (and the query's) come from
    index: LocalIndex
    configured: bool  # the configured generation (False: an older one, being replaced)


def version_for(note: dict[str, Any], serving: Serving) -> tuple[str | None, int, int] | None:
    """(generation, version, chunk count) of the note's chunks `serving` holds, or None.

    The configured index holds a note's chunks of its generation. An older generation's
    index holds the version the note still has in that generation: its indexed one, or the
    one a re-index into the new generation kept for it (`served`). When neither exists (a
    note created, or edited after a chunker change, during the change) and the note's
    vectors come from the same model, the older index takes its new chunks: the vectors are
    comparable. With another model the note is absent there until its user switches."""
    indexed = note.get("indexed_version")
    if note_status(note) != "active" or not isinstance(indexed, int):
        return None
    count = int(note.get("chunk_count") or 0)
    generation = note_generation(note)
    if serving.generation is None:  # untracked: whatever the model made
        return (
            (generation, indexed, count)
            if note.get("embedding_model") == serving.model_key
            else None
        )
    if generation == serving.generation:
        return generation, indexed, count
    if serving.configured:
        return None
    served = note.get("served")
    if isinstance(served, dict) and served.get("generation") == serving.generation:
        version = served.get("version")
        if isinstance(version, int):
            return serving.generation, version, int(served.get("chunk_count") or 0)
    if note.get("embedding_model") == serving.model_key:
        return generation, indexed, count
    return None


class ServingIndexes:
    """The configured index, the older generations' indexes, and who reads which."""

    def __init__(self, configured: Serving, *, grace_s: float = SWITCH_GRACE_S) -> None:
        self.configured = configured
        self.grace_s = grace_s
        self._older: dict[str, Serving] = {}
        self._reads: dict[str, str] = {}  # author → older generation they read
        self._drops: set[asyncio.TimerHandle] = set()

    def add_reader(self, author_id: str, generation: str, model_key: str) -> Serving | None:
        """Keep serving `author_id` from `generation` (made with `model_key`) until their
        switch; None when that generation's vectors cannot be held (unknown dimensions)."""
        if generation == self.configured.generation:
            return None
        older = self._older.get(generation)
        if older is None:
            dimensions = model_dimensions(model_key)
            if not dimensions:
                log.warning("search.generation_unusable", generation=generation, model=model_key)
                return None
            older = Serving(generation, model_key, LocalIndex(dimensions), configured=False)
            self._older[generation] = older
        self._reads[author_id] = generation
        return older

    def reading(self, author_id: str) -> Serving:
        """The index the author's search reads now."""
        generation = self._reads.get(author_id)
        if generation is None:
            return self.configured
        return self._older.get(generation, self.configured)

    def holding(self, author_id: str) -> list[Serving]:
        """Every index that must follow the author's notes: the configured one, and the
        older one they read, if any."""
        reading = self.reading(author_id)
        return [self.configured] if reading is self.configured else [self.configured, reading]

    def older(self) -> list[Serving]:
        return list(self._older.values())

    def readers(self) -> dict[str, str]:
        """Authors reading an older generation, and which."""
        return dict(self._reads)

    def switch(self, author_id: str) -> bool:
        """Point the author at the configured index (one assignment: atomic for readers);
        their partition of the old index goes after the grace period. False when they read
        it already."""
        generation = self._reads.pop(author_id, None)
        if generation is None:
            return False
        older = self._older.get(generation)
        if older is not None:
            self._later(lambda: self._drop(author_id, generation))
        log.info("search.reader_switched", author_id=author_id, previous=generation)
        return True

    def _later(self, action: Any) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            action()
            return
        handle: asyncio.TimerHandle | None = None

        def run() -> None:
            self._drops.discard(handle)  # type: ignore[arg-type]
            action()

        handle = loop.call_later(self.grace_s, run)
        self._drops.add(handle)

    def _drop(self, author_id: str, generation: str) -> None:
        older = self._older.get(generation)
        if older is None or author_id in self._reads:
            return
        older.index.remove_author(author_id)
        if generation not in self._reads.values():
            del self._older[generation]
            older.index.close()

    def memory_bytes(self) -> int:
        return sum(s.index.memory_bytes() for s in [self.configured, *self._older.values()])

    def close(self) -> None:
        for handle in self._drops:
            handle.cancel()
        self._drops.clear()
        for older in self._older.values():
            with contextlib.suppress(Exception):
                older.index.close()
        self._older.clear()
        self._reads.clear()
        self.configured.index.close()
