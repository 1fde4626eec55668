"""`/v1/chat`, `/v1/chat/context` and `/v1/chat/completions` (OpenAI-compatible) schemas."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from api.retrieval.schemas import FiltersIn
from api.schemas import NON_BLANK


def _unicode(v: str) -> str:
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text is not valid Unicode") from None
    if not v.strip():
        raise ValueError("must not be blank")
    return v


class HistoryMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant"]
    content: str = Field(min_length=1, max_length=8000, pattern=NON_BLANK)

    _content = field_validator("content")(lambda v: _unicode(v))


# The largest body a valid chat request can need, counted as for SEARCH_MAX_BODY_BYTES: an
# 8 000-character message, 20 history messages of 8 000 and the search filters come to
# ~2.78 MB (tests/security/test_route_body_limits.py).
CHAT_MAX_BODY_BYTES = 3_000_000


class ChatRequest(BaseModel):
    """A question about your notes. With `stream: true` the answer comes as Server-Sent
    Events: `citations` (candidate sections), `token`s, then `done` (the JSON response)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "message": "When does the nightly backup run and how do I restore it?",
                    "history": [],
                    "filters": {"tags": ["ops"]},
                    "stream": False,
                }
            ]
        },
    )
    message: str = Field(min_length=1, max_length=8000, pattern=NON_BLANK)
    history: list[HistoryMessage] = Field(default_factory=list, max_length=20)
    filters: FiltersIn | None = None
    # Strict: only JSON true/false (lax mode would read "yes", "on" or 1 as true).
    stream: bool = Field(False, strict=True)

    _message = field_validator("message")(lambda v: _unicode(v))


class ContextRequest(BaseModel):
    """Retrieve the numbered sections for a question, to call your own model."""

    model_config = ConfigDict(extra="forbid")
    message: str = Field(min_length=1, max_length=8000, pattern=NON_BLANK)
    filters: FiltersIn | None = None

    _message = field_validator("message")(lambda v: _unicode(v))


class CitationOut(BaseModel):
    """Reference `[ref]`: a section of a note, with exact character offsets."""

    ref: int
    note_id: str
    title: str
    heading_path: list[str]
    start_offset: int
    end_offset: int
    snippet: str
    note_version: int | None = Field(
        None, description="The note version the offsets index (see search's matching_chunks)"
    )
    relevance: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="The section's estimated relevance to the question (search's "
        "`relevance`); when no section reaches CHAT_MIN_RELEVANCE nothing is cited",
    )


class ChatResponse(BaseModel):
    answer: str
    citations: list[CitationOut] = Field(description="Only the references the answer cites")
    mode: Literal["llm", "extractive"]
    model: str | None = None
    warning: str | None = Field(
        None,
        description="Set when the answer or its retrieval was degraded: the chat model failed "
        "(extractive answer), or the embedding provider did (keyword results only)",
    )


class ContextResponse(BaseModel):
    context: str = Field(description="Numbered sections, ready to put in a prompt")
    citations: list[CitationOut]
    system_prompt: str = Field(description="The rules Autonote gives its own model")
    warning: str | None = Field(
        None, description="Set when retrieval was degraded (e.g. keyword results only)"
    )


class OpenAITextPart(BaseModel):
    """A text part of a message's content (other part types are a 422)."""

    type: Literal["text"]
    text: str


class OpenAIMessage(BaseModel):
    """A Chat Completions message; its other fields (`name`, …) are ignored."""

    role: Literal["system", "user", "assistant"]
    content: str | list[OpenAITextPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(p.text for p in self.content)
        return self.content or ""


class OpenAIChatRequest(BaseModel):
    """OpenAI's Chat Completions request. The last message is the question (a user
    message); earlier user/assistant messages are the history; system messages are
    ignored. Sampling fields are accepted (their types checked) and ignored; other
    unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore")
    model: str = Field("autonote", max_length=200)
    messages: list[OpenAIMessage] = Field(min_length=1, max_length=100)
    stream: bool = Field(False, strict=True)
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    n: Literal[1] | None = None
    stop: str | list[str] | None = None
    stream_options: dict[str, Any] | None = None
    user: str | None = None

    @model_validator(mode="after")
    def _last_is_a_question(self) -> OpenAIChatRequest:
        last = self.messages[-1]
        if last.role != "user":
            raise ValueError("the last message must be the user's question")
        question = last.text()
        if not question.strip() or len(question) > 8000:
            raise ValueError("the question must be 1 to 8000 characters, not blank")
        _unicode(question)
        return self
