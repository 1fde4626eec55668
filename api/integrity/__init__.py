"""Integrity checker: does the chunk index agree with the notes? (`autonote check`)."""

from api.integrity.checker import IntegrityChecker
from api.integrity.report import CheckReport, RepairResult
from api.integrity.rules import Expectations, Finding, check_missing_note, check_note

__all__ = [
    "CheckReport",
    "Expectations",
    "Finding",
    "IntegrityChecker",
    "RepairResult",
    "check_missing_note",
    "check_note",
]
