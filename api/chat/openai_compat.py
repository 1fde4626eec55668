"""OpenAI Chat Completions shapes over ChatService's answers (pure): a request's messages
as question and history, an answer as a `chat.completion` (cited content plus a Sources
list) or as `chat.completion.chunk` SSE lines. Docs: docs/chat.md."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from api.chat.safety import neutralise
from api.chat.schemas import OpenAIChatRequest
from api.chat.service import citation_dict
from api.chat.types import ChatEvent, ChatResult
from connectors.chat import ChatMessage

MODEL_ID = "autonote"
# Starts the Sources list appended to an answer; cut from assistant turns sent back as history.
SOURCES_MARKER = "\n\n**Sources**\n"
# A streamed answer replaced mid-way (a `reset`): OpenAI chunks cannot retract, so a rule
# separates the discarded text from the answer that replaces it.
RESET_SEPARATOR = "\n\n---\n\n"


def question_and_history(body: OpenAIChatRequest) -> tuple[str, list[ChatMessage]]:
    """The last (user) message is the question; earlier non-blank user/assistant turns are
    the history, assistant turns without their Sources list. System messages are dropped."""
    history: list[ChatMessage] = []
    for m in body.messages[:-1]:
        text = m.text()
        if m.role == "assistant":
            text = text.split(SOURCES_MARKER, 1)[0]
        if m.role != "system" and text.strip():
            history.append({"role": m.role, "content": text})
    return body.messages[-1].text(), history


def sources(citations: list[dict[str, Any]]) -> str:
    """The cited sections as a markdown list (`- [1] Title › Heading`), after the marker."""
    if not citations:
        return ""
    lines = [f"- [{c['ref']}] {' › '.join(c['heading_path'] or [c['title']])}" for c in citations]
    return neutralise(SOURCES_MARKER + "\n".join(lines))


def _envelope(kind: str, completion_id: str, model: str) -> dict[str, Any]:
    return {"id": completion_id, "object": kind, "created": int(time.time()), "model": model}


def new_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def completion(result: ChatResult, model: str) -> dict[str, Any]:
    """A `chat.completion`: the answer with its Sources list, plus `citations` (as
    `/v1/chat` gives them). Token counts are not kept: usage is zeros."""
    citations = [citation_dict(c) for c in result.citations]
    return {
        **_envelope("chat.completion", new_id(), model),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": result.answer + sources(citations)},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        "citations": citations,
    }


def _chunk(base: dict[str, Any], delta: dict[str, Any], **extra: Any) -> bytes:
    finish = extra.pop("finish_reason", None)
    body = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()


def _content(event: ChatEvent, shown: bool) -> str:
    """What a token or reset event adds to the streamed content."""
    if event.event == "token":
        return event.data["text"]
    if event.event == "reset" and shown:
        return RESET_SEPARATOR
    return ""


async def chunks(events: AsyncIterator[ChatEvent], model: str) -> AsyncIterator[bytes]:
    """ChatService.stream as `chat.completion.chunk` SSE lines: the role, the token texts
    (a rule where a `reset` replaces what was shown), the Sources list, a last chunk with
    `finish_reason: stop` and the `done` event's `citations` and `reset`, then `[DONE]`."""
    base = _envelope("chat.completion.chunk", new_id(), model)
    yield _chunk(base, {"role": "assistant", "content": ""})
    shown = reset = False
    async for event in events:
        if event.event == "done":
            citations = event.data["citations"]
            if tail := sources(citations):
                yield _chunk(base, {"content": tail})
            yield _chunk(base, {}, finish_reason="stop", citations=citations, reset=reset)
            break
        reset = reset or (event.event == "reset" and shown)
        if text := _content(event, shown):
            shown = True
            yield _chunk(base, {"content": text})
    yield b"data: [DONE]\n\n"


def models_list() -> dict[str, Any]:
    return {
        "object": "list",
        "data": [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "autonote"}],
    }
