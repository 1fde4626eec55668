"""Evaluation data for retrieval quality: labelled datasets of notes and questions."""

from api.evaluation.dataset import (
    QUESTION_TYPES,
    Dataset,
    DatasetError,
    DatasetIssue,
    Gold,
    Note,
    Question,
    QuestionType,
    load_dataset,
    parse_notes,
    parse_questions,
)
from api.evaluation.sections import Heading, Section, all_sections, leaf_sections, scan_headings

__all__ = [
    "QUESTION_TYPES",
    "Dataset",
    "DatasetError",
    "DatasetIssue",
    "Gold",
    "Heading",
    "Note",
    "Question",
    "QuestionType",
    "Section",
    "all_sections",
    "leaf_sections",
    "load_dataset",
    "parse_notes",
    "parse_questions",
    "scan_headings",
]
