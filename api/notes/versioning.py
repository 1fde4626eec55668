"""A note's `version` read as a whole number ≥ 1, in Python and in an update pipeline.

The API writes `version` as an integer from 1 up. Documents of the legacy system may lack
it (version 1) or carry it as a string ("3") or a double (3.0). Left as they are, such a
note never equals its integer `indexed_version` (the migration would re-index it on every
run), an If-Match on it could never match, and `$add` on a string fails. Every reader goes
through `whole_version`; every write that touches `version` goes through `WHOLE_VERSION`,
so the first edit or migration stores the integer.

Both apply one rule, MongoDB's `$convert` to a 64-bit integer restricted to number and
string inputs: an int or long is kept; a double or decimal is truncated; a string of
ASCII digits with an optional sign is read in base 10. A result outside 1..MAX_VERSION
(which also covers every value `$convert` rejects as too large for 64 bits),
and anything else (bool, date, binary, JavaScript code, null, missing, ...), gives 1. The
tests check the two agree value by value on the server.

MAX_VERSION (12 digits, what an If-Match header may carry) keeps every version a client
can see usable in If-Match, and `NEXT_VERSION` stops there instead of overflowing 64 bits
(which `$add` turns into a double): a trillion edits of one note are not a real case, only
legacy junk reaches it.
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
