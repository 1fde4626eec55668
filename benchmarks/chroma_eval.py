"""The Chroma chunking evaluation ("Evaluating Chunking Strategies for Retrieval", Smith &
Troynikov, 2024) on character ranges: data loading, retrieval and the report's metrics.

Pure logic apart from reading the data files. Metrics follow the report's code
(`BaseEvaluation._scores_from_dataset_and_retrievals` in brandonstarxel/chunking_evaluation),
per question, then averaged over questions:

    numerator  = |∪ (retrieved chunk ∩ reference)|  (only chunks of the question's corpus)
    recall     = numerator / Σ|reference|
    precision  = numerator / Σ|retrieved chunk|      (all k retrieved chunks)
    IoU        = numerator / (Σ|retrieved chunk| + |reference not covered by any retrieved|)

Retrieval scope: the report's code queries one collection holding the chunks of all five
corpora (a chunk of another corpus is retrieved, adds to Σ|retrieved|, and never to the
numerator). `scope="corpus"` restricts the candidates to the question's own corpus instead;
both are offered and reported, labelled.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

Range = tuple[int, int]
Scope = Literal["corpus", "global"]


@dataclass(frozen=True, slots=True)
class Question:
    """One evaluation question with its golden excerpts (character ranges)."""

    text: str
    corpus_id: str
    references: tuple[Range, ...]


@dataclass(frozen=True, slots=True)
class Span:
    """One chunk: its character range in the corpus and the text that gets embedded."""

    start: int
    end: int
    embed_text: str


@dataclass(slots=True)
class Scores:
    """Mean recall / precision / IoU (fractions) overall and per corpus; `per_question`
    keeps each question's (recall, precision, IoU), in question order, for intervals."""

    recall: float
    precision: float
    iou: float
    per_corpus: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    per_question: list[tuple[float, float, float]] = field(default_factory=list)


def load_corpora(corpora_dir: Path) -> dict[str, str]:
    """Corpus id (file stem) → text, read as the report's code reads it (text mode)."""
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(corpora_dir.glob("*.md"))}


def load_questions(csv_path: Path, corpora: dict[str, str]) -> list[Question]:
    """Parse questions_df.csv; fail if any reference does not match its corpus exactly."""
    questions: list[Question] = []
    with csv_path.open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            corpus = corpora[row["corpus_id"]]
            refs = []
            for ref in json.loads(row["references"]):
                start, end = int(ref["start_index"]), int(ref["end_index"])
                if corpus[start:end] != ref["content"]:
                    raise ValueError(f"reference does not match corpus {row['corpus_id']}")
                refs.append((start, end))
            questions.append(Question(row["question"], row["corpus_id"], tuple(refs)))
    return questions


def union_ranges(ranges: Sequence[Range]) -> list[Range]:
    """Merge overlapping or touching ranges."""
    merged: list[Range] = []
    for start, end in sorted(r for r in ranges if r[1] > r[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def total_length(ranges: Sequence[Range]) -> int:
    """Σ |range| (no merging: overlapping ranges count twice, as in the report)."""
    return sum(end - start for start, end in ranges)


def subtract(ranges: Sequence[Range], cut: Range) -> list[Range]:
    """`ranges` minus the range `cut`."""
    out: list[Range] = []
    for start, end in ranges:
        if cut[1] <= start or cut[0] >= end:
            out.append((start, end))
            continue
        if start < cut[0]:
            out.append((start, cut[0]))
        if cut[1] < end:
            out.append((cut[1], end))
    return out


def score_question(
    retrieved: Sequence[tuple[int, int, bool]], references: Sequence[Range]
) -> tuple[float, float, float]:
    """(recall, precision, IoU) of one question; retrieved = (start, end, same_corpus)."""
    hits: list[Range] = []
    unused = list(references)
    for start, end, same_corpus in retrieved:
        if not same_corpus:
            continue
        for ref_start, ref_end in references:
            lo, hi = max(start, ref_start), min(end, ref_end)
            if lo < hi:
                hits.append((lo, hi))
                unused = subtract(unused, (lo, hi))
    numerator = total_length(union_ranges(hits))
    recall_den = total_length(references)
    precision_den = total_length([(s, e) for s, e, _ in retrieved])
    iou_den = precision_den + total_length(unused)
    return (
        numerator / recall_den if recall_den else 0.0,
        numerator / precision_den if precision_den else 0.0,
        numerator / iou_den if iou_den else 0.0,
    )


def retrieve_top_k(query_vecs: np.ndarray, chunk_vecs: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k most cosine-similar chunks per query (rows L2-normalised), best first."""
    sims = query_vecs @ chunk_vecs.T
    k = min(k, chunk_vecs.shape[0])
    top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    order = np.take_along_axis(sims, top, axis=1).argsort(axis=1)[:, ::-1]
    return np.take_along_axis(top, order, axis=1)


def evaluate(
    questions: Sequence[Question],
    question_vecs: np.ndarray,
    spans: dict[str, list[Span]],
    span_vecs: dict[str, np.ndarray],
    *,
    k: int = 5,
    scope: Scope = "corpus",
) -> Scores:
    """Retrieve k chunks per question and average the report's metrics."""
    per_question: list[tuple[float, float, float]] = [(0.0, 0.0, 0.0)] * len(questions)
    if scope == "global":
        ids = list(spans)
        owner = np.concatenate([np.full(len(spans[c]), i) for i, c in enumerate(ids)])
        flat = [s for c in ids for s in spans[c]]
        top = retrieve_top_k(question_vecs, np.concatenate([span_vecs[c] for c in ids]), k)
        for qi, q in enumerate(questions):
            got = [(flat[j].start, flat[j].end, ids[owner[j]] == q.corpus_id) for j in top[qi]]
            per_question[qi] = score_question(got, q.references)
    else:
        for corpus_id, corpus_spans in spans.items():
            rows = [i for i, q in enumerate(questions) if q.corpus_id == corpus_id]
            if not rows:
                continue
            top = retrieve_top_k(question_vecs[rows], span_vecs[corpus_id], k)
            for qi, picks in zip(rows, top, strict=True):
                got = [(corpus_spans[j].start, corpus_spans[j].end, True) for j in picks]
                per_question[qi] = score_question(got, questions[qi].references)
    arr = np.array(per_question)
    per_corpus = {}
    for corpus_id in spans:
        mask = np.array([q.corpus_id == corpus_id for q in questions])
        if mask.any():
            r, p, i = arr[mask].mean(axis=0)
            per_corpus[corpus_id] = (float(r), float(p), float(i))
    recall, precision, iou = arr.mean(axis=0)
    return Scores(float(recall), float(precision), float(iou), per_corpus, per_question)
