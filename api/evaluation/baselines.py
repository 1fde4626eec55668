"""The note-level baseline of the original design: one embedding per note, ranked by cosine.

`truncated` embeds the note as one input; `mean_of_parts` averages the vectors of its parts.
Each result cites the whole note, which is generous to the baseline.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from api.chunking import get_chunker
from api.evaluation.dataset import Dataset, Question
from api.evaluation.harness import EvalRun, SearchConfig
from api.evaluation.metrics import Citation, RankedNote, aggregate, judge

NoteVector = Literal["truncated", "mean_of_parts"]


def _normalise(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.clip(norms, 1e-12, None)


async def note_vectors(dataset: Dataset, embedder: Any, how: NoteVector) -> np.ndarray:
    """One L2-normalised vector per note, in `dataset.notes` order."""
    notes = list(dataset.notes.values())
    if how == "truncated":
        texts = [f"{n.title}\n\n{n.content_md}" for n in notes]
        batch = await embedder.embed(texts, truncate=True)
        return _normalise(np.asarray(batch.vectors, dtype=np.float32))
    chunker = get_chunker(
        "whole_note", tokenizer=embedder.tokenizer, max_input_tokens=embedder.max_input_tokens
    )
    rows = []
    for n in notes:
        parts = chunker.chunk_note(n.content_md, n.title) or []
        texts = [p.embedding_text for p in parts] or [n.title]
        batch = await embedder.embed(texts)
        rows.append(np.asarray(batch.vectors, dtype=np.float32).mean(axis=0))
    return _normalise(np.stack(rows))


async def evaluate_note_level(
    dataset: Dataset,
    embedder: Any,
    questions: Sequence[Question] | None = None,
    *,
    how: NoteVector = "truncated",
    limit: int = 6,
    label: str = "",
) -> EvalRun:
    """Rank whole notes by cosine to each question; score like any other run."""
    questions = dataset.questions if questions is None else questions
    ids = list(dataset.notes)
    matrix = await note_vectors(dataset, embedder, how)
    outcomes = []
    took: list[float] = []
    for q in questions:
        batch = await embedder.embed([" ".join(q.question.split())], truncate=True)
        scores = matrix @ np.asarray(batch.vectors[0], dtype=np.float32)
        top = sorted(range(len(ids)), key=lambda i: (-float(scores[i]), ids[i]))[:limit]
        ranked = [
            RankedNote(
                ids[i],
                (Citation(ids[i], 0, len(dataset.notes[ids[i]].content_md), float(scores[i])),),
            )
            for i in top
        ]
        outcomes.append(judge(q, ranked, dataset.notes))
        took.append(0.0)
    search = SearchConfig(mode="vector", limit=limit, chunks_per_note=1)
    return EvalRun(
        label or f"note-level ({how})", search, tuple(outcomes), aggregate(outcomes), tuple(took)
    )
