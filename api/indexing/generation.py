"""Generations as the reconciler sees them (pure): the configured one, the generation and
the `served` version a note document records, and the commit's rule for `served`.

A note indexed into a new generation while its chunks are of another keeps the older
generation's version searchable for readers of that generation: its commit records it as
`served: {generation, version, chunk_count, embedding_model, chunking_version}` and no
eviction deletes those chunks. See docs/decisions/0008-blue-green-reindexing.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api.chunk_store.generations import generation_of
from api.chunk_store.repository import Pinned


@dataclass(frozen=True, slots=True)
class Generation:
    """One chunker and embedding model: what the chunks they make are stamped with."""

    chunking_version: str
    model_key: str

    @property
    def key(self) -> str:
        return generation_of(self.chunking_version, self.model_key)

    def as_serving(self) -> dict[str, Any]:
        """The fields of a `search_generations` record reading this generation."""
        return {
            "generation": self.key,
            "embedding_model": self.model_key,
            "chunking_version": self.chunking_version,
        }


def note_generation(note: dict[str, Any]) -> str | None:
    """The generation of the note's indexed chunks (None when nothing is indexed). A note
    written before generations has it from its two index fields."""
    if note.get("indexed_version") is None:
        return None
    stored = note.get("generation")
    if isinstance(stored, str):
        return stored
    return generation_of(note.get("chunking_version"), note.get("embedding_model"))


def served_pin(note: dict[str, Any]) -> Pinned | None:
    """(generation, version) of the chunks the note keeps for an older generation's
    readers, or None."""
    served = note.get("served")
    if not isinstance(served, dict):
        return None
    generation, version = served.get("generation"), served.get("version")
    if not isinstance(generation, str) or not isinstance(version, int):
        return None
    return generation, version


def indexed_pin(note: dict[str, Any]) -> Pinned | None:
    """(generation, version) of the note's indexed chunks, or None."""
    generation, version = note_generation(note), note.get("indexed_version")
    if generation is None or not isinstance(version, int):
        return None
    return generation, version


def served_expression(
    target: Generation, version: int | None, prior_generation: str | None
) -> dict[str, Any]:
    """The commit's value of `served` (an aggregation expression, evaluated on the note as
    it is when the commit lands, so a concurrent clean-up is never undone):

    - nothing indexed any more (a trashed note): none;
    - the note's chunks are of another generation: what readers of that generation see,
      the older `served` if there is one (a change made during a change), else the
      version indexed until now;
    - already in `target`: the `served` it has, except that a new version of a note whose
      served chunks are of the same model (a chunker change) drops it: those vectors are
      comparable, so the older generation's readers take the new chunks directly;
    - never a version of `target` itself.
    `prior_generation`: the note's generation as the run read it (for a note stored
    before notes carried one)."""
    if version is None:
        return {"$literal": None}
    generation = {"$ifNull": ["$generation", {"$literal": prior_generation}]}
    indexed = {"$ifNull": ["$indexed_version", None]}
    current = {
        "generation": generation,
        "version": "$indexed_version",
        "chunk_count": {"$ifNull": ["$chunk_count", 0]},
        "embedding_model": "$embedding_model",
        "chunking_version": "$chunking_version",
    }
    key = {"$literal": target.key}
    other = {"$and": [{"$ne": [generation, key]}, {"$ne": [indexed, None]}]}
    prior = {"$ifNull": ["$served", {"$cond": [other, current, None]}]}
    comparable_edit = {
        "$and": [
            {"$eq": [generation, key]},
            {"$ne": [indexed, version]},
            {"$eq": ["$$prior.embedding_model", {"$literal": target.model_key}]},
        ]
    }
    dropped = {"$or": [{"$eq": ["$$prior.generation", key]}, comparable_edit]}
    return {"$let": {"vars": {"prior": prior}, "in": {"$cond": [dropped, None, "$$prior"]}}}
