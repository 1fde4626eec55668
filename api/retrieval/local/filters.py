"""User filters of the local index, evaluated as numpy masks over one author's notes.

Each note of an author has a small integer ordinal (assigned by `LocalIndex`). This module
keeps, per ordinal, whether the note is present and its `updated_at`, plus an inverted index
tag → ordinals, so that `SearchFilters` become a boolean mask over ordinals in a few vector
operations instead of a Python loop over every note.

Not thread-safe by itself: `LocalIndex` mutates and reads it under the author's lock.
"""

from __future__ import annotations

import numpy as np

from api.retrieval.types import NoteMeta, SearchFilters, as_utc


class NoteFilterIndex:
    """Per-ordinal note attributes and a tag → ordinals index for one author."""

    def __init__(self, capacity: int = 64) -> None:
        self._present = np.zeros(capacity, dtype=bool)
        self._updated = np.full(capacity, np.nan, dtype=np.float64)
        self._tags: dict[str, set[int]] = {}
        self._size = 0  # ordinals [0, size) have been used

    def set(self, ord_: int, meta: NoteMeta, previous: NoteMeta | None = None) -> None:
        """Record `meta` for ordinal `ord_` (replacing `previous`, if it was recorded)."""
        if previous is not None:
            self._untag(ord_, previous.tags)
        if ord_ >= len(self._present):
            capacity = len(self._present)
            while capacity <= ord_:
                capacity *= 2
            present = np.zeros(capacity, dtype=bool)
            present[: self._size] = self._present[: self._size]
            updated = np.full(capacity, np.nan, dtype=np.float64)
            updated[: self._size] = self._updated[: self._size]
            self._present, self._updated = present, updated
        self._present[ord_] = True
        self._updated[ord_] = as_utc(meta.updated_at).timestamp()
        for tag in set(meta.tags):
            self._tags.setdefault(tag, set()).add(ord_)
        self._size = max(self._size, ord_ + 1)

    def clear(self, ord_: int, meta: NoteMeta) -> None:
        """Forget ordinal `ord_` (whose recorded metadata is `meta`)."""
        self._untag(ord_, meta.tags)
        self._present[ord_] = False
        self._updated[ord_] = np.nan

    def mask(self, filters: SearchFilters | None, note_ords: list[int] | None) -> np.ndarray | None:
        """Boolean mask over ordinals `[0, size)` of the notes passing `filters`, or None
        when nothing is filtered. `note_ords` are the ordinals of `filters.note_ids` that
        exist (resolved by the caller, which owns the note id → ordinal map)."""
        if filters is None or filters.is_empty:
            return None
        n = self._size
        mask = self._present[:n].copy()
        if filters.note_ids is not None:
            chosen = np.zeros(n, dtype=bool)
            chosen[np.asarray(note_ords or [], dtype=np.int64)] = True
            mask &= chosen
        if filters.tags is not None:
            tagged = np.zeros(n, dtype=bool)
            for tag in set(filters.tags):
                ords = self._tags.get(tag)
                if ords:
                    tagged[np.fromiter(ords, dtype=np.int64, count=len(ords))] = True
            mask &= tagged
        if filters.updated_after is not None:
            after = as_utc(filters.updated_after).timestamp()
            with np.errstate(invalid="ignore"):
                mask &= self._updated[:n] > after
        return mask

    def nbytes(self) -> int:
        """Approximate bytes held."""
        sets = sum(64 + 40 * len(s) for s in self._tags.values())
        return self._present.nbytes + self._updated.nbytes + sets

    def _untag(self, ord_: int, tags: list[str]) -> None:
        for tag in set(tags):
            ords = self._tags.get(tag)
            if ords is not None:
                ords.discard(ord_)
                if not ords:
                    del self._tags[tag]
