"""Vectors as BSON binary float32 vectors (subtype 9, dtype 0x27): 4 bytes per dimension
instead of ~9 for an array of doubles, and indexable by Atlas Vector Search. Encoded from
numpy directly (same bytes as `Binary.from_vector(..., FLOAT32)`, without a Python list)."""

from __future__ import annotations

import numpy as np
from bson.binary import Binary

_FLOAT32_HEADER = b"\x27\x00"  # dtype FLOAT32, padding 0
VECTOR_SUBTYPE = 9


def to_bson_vector(vector: np.ndarray) -> Binary:
    """A float32 BSON vector of `vector` (1-D)."""
    return Binary(
        _FLOAT32_HEADER + np.ascontiguousarray(vector, dtype="<f4").tobytes(), VECTOR_SUBTYPE
    )


def from_bson_vector(value: Binary | bytes | list[float]) -> np.ndarray:
    """The float32 array stored in a chunk (also accepts legacy arrays of doubles)."""
    if isinstance(value, list):
        return np.asarray(value, dtype=np.float32)
    raw = bytes(value)
    if raw[:2] != _FLOAT32_HEADER:
        raise ValueError("not a float32 BSON vector")
    return np.frombuffer(raw, dtype="<f4", offset=2).astype(np.float32, copy=False)
