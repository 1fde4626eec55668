"""Queries on `notes` for switching users between generations: whose notes are of which
generation, whether a user's new index is complete, and the counts the status reports.
(The claims and commits are `IndexQueue`'s; the records of who reads which generation are
`ServingRecords`'.)"""

from __future__ import annotations

from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from api.indexing.claims import ADDRESSABLE
from api.notes.stored import STATUS_QUERY

ACTIVE = STATUS_QUERY["active"]
# A failed note with nothing indexed loses nothing when its user switches: it does not
# hold the switch up (a note that keeps failing would, for good).
NOTHING_TO_LOSE = {"index_status": "failed", "indexed_version": None}


class SwitchQueries:
    def __init__(self, db: AsyncDatabase) -> None:
        self.collection = db.notes

    async def incomplete(self, author_id: Any, generation: str) -> bool:
        """Whether an active note of the author still lacks `generation`: not indexed into
        it yet (queued, failed with older chunks, or new). One range pair of the
        `generation_author_status` index: only such notes are read."""
        query = {
            "generation": {"$ne": generation},
            "author_id": author_id,
            "status": ACTIVE,
            **ADDRESSABLE,
            "$nor": [NOTHING_TO_LOSE],
        }
        return await self.collection.find_one(query, {"_id": 1}) is not None

    async def by_author(self, generation: str) -> dict[Any, dict[str, Any]]:
        """Per author of active notes: how many are indexed in each generation (with that
        generation's model and chunker) and how many lack `generation`. One pass over the
        notes, at start-up when chunks of another generation exist."""
        lacks = {"$ne": ["$generation", generation]}
        groups = await self.collection.aggregate(
            [
                {"$match": {"status": ACTIVE, **ADDRESSABLE}},
                {
                    "$group": {
                        "_id": {
                            "author": "$author_id",
                            "generation": {
                                "$cond": [
                                    {"$eq": [{"$ifNull": ["$indexed_version", None]}, None]},
                                    None,
                                    "$generation",
                                ]
                            },
                            "model": "$embedding_model",
                            "chunker": "$chunking_version",
                        },
                        "notes": {"$sum": 1},
                        "lacking": {"$sum": {"$cond": [lacks, 1, 0]}},
                    }
                },
            ]
        )
        authors: dict[Any, dict[str, Any]] = {}
        async for group in groups:
            key = group["_id"]
            entry = authors.setdefault(key.get("author"), {"lacking": 0, "generations": []})
            entry["lacking"] += group["lacking"]
            if key.get("generation") is not None:
                entry["generations"].append(
                    {
                        "generation": key["generation"],
                        "embedding_model": key.get("model"),
                        "chunking_version": key.get("chunker"),
                        "notes": group["notes"],
                    }
                )
        return authors

    async def counts(self, author_id: Any | None, generation: str) -> dict[str, int]:
        """The author's (everyone's for None) active notes: total, in `generation`, queued,
        failed (lacking it), and the chunks of those in it."""
        match: dict[str, Any] = {"status": ACTIVE, **ADDRESSABLE}
        if author_id is not None:
            match = {"author_id": author_id, **match}
        groups = await self.collection.aggregate(
            [
                {"$match": match},
                {
                    "$group": {
                        "_id": {
                            "done": {"$eq": ["$generation", generation]},
                            "status": "$index_status",
                        },
                        "notes": {"$sum": 1},
                        "chunks": {"$sum": {"$ifNull": ["$chunk_count", 0]}},
                    }
                },
            ]
        )
        out = {"total": 0, "done": 0, "queued": 0, "failed": 0, "chunks_done": 0}
        async for group in groups:
            out["total"] += group["notes"]
            if group["_id"].get("done"):
                out["done"] += group["notes"]
                out["chunks_done"] += group["chunks"]
            elif group["_id"].get("status") in ("pending", "indexing"):
                out["queued"] += group["notes"]
            elif group["_id"].get("status") == "failed":
                out["failed"] += group["notes"]
        return out

    async def clear_served(self, author_id: Any) -> int:
        """Forget what the author's notes kept for an older generation (its chunks are
        gone: the user switched)."""
        result = await self.collection.update_many(
            {"author_id": author_id, "served": {"$type": "object"}}, {"$unset": {"served": ""}}
        )
        return result.modified_count

    async def authors_with_served(self) -> list[Any]:
        """Authors with notes that keep a version for an older generation."""
        return await self.collection.distinct("author_id", {"served": {"$type": "object"}})
