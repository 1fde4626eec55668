"""Chat's internal types: a numbered reference, the retrieved context, an answer and the
events of a streamed answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class Citation:
    """What reference `[ref]` points at."""

    ref: int
    note_id: str
    title: str
    heading_path: list[str]
    start_offset: int
    end_offset: int
    snippet: str
    text: str  # the section text given to the model (possibly cut to fit the budget)
    note_version: int | None = None  # the version the offsets index
    relevance: float | None = None  # the section's estimated relevance (search's)


@dataclass(frozen=True, slots=True)
class Retrieved:
    """The numbered sections for a message; `warning` when retrieval was degraded (the
    embedding provider failed: keyword results only)."""

    context: str
    citations: list[Citation]
    warning: str | None = None


@dataclass(frozen=True, slots=True)
class ChatResult:
    answer: str
    citations: list[Citation]
    mode: Literal["llm", "extractive"]
    model: str | None = None
    warning: str | None = None


@dataclass(frozen=True, slots=True)
class ChatEvent:
    """One SSE event: `citations` first, then `token`s, then `done`; `reset` between
    tokens: discard the tokens so far, the ones after replace them."""

    event: Literal["citations", "token", "reset", "done"]
    data: dict[str, Any]
