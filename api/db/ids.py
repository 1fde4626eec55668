"""Ids for documents whose `_id` a user sees (notes, chunks, users, keys)."""

from __future__ import annotations

import os
import time

from bson import ObjectId
from bson.errors import InvalidId


def new_object_id() -> ObjectId:
    """An ObjectId of the current second and 8 random bytes.

    The driver's own ObjectIds end in a per-process counter shared by every insert, so the
    gap between two of one user's note ids would count the notes and chunks the process
    wrote for every other user in between. The timestamp prefix keeps ids in creation order
    to the second (the migration's keyset pages and `generation_time` rely on that); 64
    random bits make a collision within one second negligible.
    """
    return ObjectId(int(time.time()).to_bytes(4, "big") + os.urandom(8))


def parse_object_id(value: str) -> ObjectId | None:
    """An ObjectId from its 24-hex-digit string, or None when malformed."""
    try:
        return ObjectId(value) if len(value) == 24 else None
    except (InvalidId, TypeError):
        return None
