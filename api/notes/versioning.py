"""A note's `version` read as a whole number ≥ 1, in Python (`whole_version`) and in an
update pipeline (`WHOLE_VERSION`), by one rule: MongoDB's `$convert` to a 64-bit integer,
for number and string inputs only; a result outside 1..MAX_VERSION, or any other input
(missing, null, bool, date, ...), gives 1. Legacy documents may lack `version` or hold "3"
or 3.0; every reader and every write that touches `version` goes through these, so the
first edit or migration stores the integer. MAX_VERSION (12 digits, what an If-Match header
may carry) is also where `NEXT_VERSION` stops. The tests check both agree value by value.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

from bson import Decimal128, Int64

_INT32_MAX = 2**31 - 1
MAX_VERSION = 10**12 - 1
_SIGNED_DIGITS = re.compile(r"[+-]?([0-9]+)")
_CONVERTIBLE = ["int", "long", "double", "decimal", "string"]

WHOLE_VERSION: dict[str, Any] = {
    "$let": {
        "vars": {
            "v": {
                "$cond": [
                    {"$in": [{"$type": "$version"}, _CONVERTIBLE]},
                    {
                        "$convert": {
                            "input": "$version",
                            "to": "long",
                            "onError": None,
                            "onNull": None,
                        }
                    },
                    None,
                ]
            }
        },
        # Stored as the API stores its own versions: int32 while it fits.
        "in": {
            "$cond": [
                {"$and": [{"$gte": ["$$v", 1]}, {"$lte": ["$$v", MAX_VERSION]}]},
                {"$cond": [{"$lte": ["$$v", _INT32_MAX]}, {"$toInt": "$$v"}, "$$v"]},
                1,
            ]
        },
    }
}


def _as_integer(value: Any) -> int | None:
    """`value` truncated to an integer as `$convert` to "long" does, or None where that
    errors for a reason other than size (any size beyond MAX_VERSION reads as 1 anyway)."""
    # Exact types: pymongo decodes JavaScript code (and BSON symbols) to `str` subclasses,
    # which the server does not convert.
    if isinstance(value, bool):
        return None
    if type(value) is int or isinstance(value, Int64):
        number = value
    elif type(value) is float:
        if not math.isfinite(value):
            return None
        number = math.trunc(value)
    elif isinstance(value, Decimal128 | Decimal):
        exact = value.to_decimal() if isinstance(value, Decimal128) else value
        if not exact.is_finite():
            return None
        number = int(exact)  # truncates toward zero, like MongoDB
    elif type(value) is str:
        match = _SIGNED_DIGITS.fullmatch(value)
        # More significant digits than MAX_VERSION has are out of range without parsing
        # (Python refuses to parse more than 4 300 at all).
        if match is None or len(match.group(1).lstrip("0")) > len(str(MAX_VERSION)):
            return None
        number = int(value)
    else:
        return None
    return number


def whole_version(value: Any) -> int:
    """`value` (a stored `version`) as the whole number `WHOLE_VERSION` would store."""
    number = _as_integer(value)
    return number if number is not None and 1 <= number <= MAX_VERSION else 1


# The version after an edit, stopping at MAX_VERSION (module docstring).
NEXT_VERSION: dict[str, Any] = {"$min": [{"$add": [WHOLE_VERSION, 1]}, MAX_VERSION]}


def is_whole_version(value: Any) -> bool:
    """True when `value` is stored as `WHOLE_VERSION` would store it (an integer ≥ 1)."""
    return isinstance(value, int) and not isinstance(value, bool) and whole_version(value) == value
