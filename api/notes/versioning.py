"""A note's `version` read as a whole number ≥ 1, in Python and in an update pipeline.

The API writes `version` as an integer from 1 up. Documents of the legacy system may lack
it (version 1) or carry it as a string ("3") or a double (3.0). Left as they are, such a
note never equals its integer `indexed_version` (the migration would re-index it on every
run), an If-Match on it could never match, and `$add` on a string fails. Every reader goes
through `whole_version`; every write that touches `version` goes through `WHOLE_VERSION`,
so the first edit or migration stores the integer. Both give the same answer: an integer
≥ 1 is kept; a string holding an integer, or a double, gives that integer (truncated);
anything else, or anything below 1, is 1.
"""

from __future__ import annotations

import math
import re
from typing import Any

_INTEGER = re.compile(r"-?[0-9]+")

WHOLE_VERSION: dict[str, Any] = {
    "$let": {
        "vars": {
            "v": {
                "$cond": [
                    {"$in": [{"$type": "$version"}, ["int", "long"]]},
                    "$version",
                    {
                        "$convert": {
                            "input": "$version",
                            "to": "int",
                            "onError": None,
                            "onNull": None,
                        }
                    },
                ]
            }
        },
        "in": {"$cond": [{"$gte": ["$$v", 1]}, "$$v", 1]},
    }
}


def whole_version(value: Any) -> int:
    """`value` (a stored `version`) as the whole number the pipeline would store."""
    number: int | None = None
    if isinstance(value, bool):
        number = int(value)
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and math.isfinite(value):
        number = int(value)
    elif isinstance(value, str) and _INTEGER.fullmatch(value):
        number = int(value)
    return number if number is not None and number >= 1 else 1
