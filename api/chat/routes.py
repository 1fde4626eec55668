"""`POST /v1/chat` (JSON or SSE), `POST /v1/chat/context`, and the OpenAI-compatible
`POST /v1/chat/completions` and `GET /v1/models`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from fastapi.sse import format_sse_event

from api.chat import openai_compat
from api.chat.prompts import SYSTEM_PROMPT
from api.chat.schemas import (
    ChatRequest,
    ChatResponse,
    CitationOut,
    ContextRequest,
    ContextResponse,
    OpenAIChatRequest,
)
from api.chat.service import ChatService, citation_dict, result_dict
from api.chat.types import ChatEvent
from api.schemas import AUTHED, errors
from api.users.auth import CurrentUser

router = APIRouter(prefix="/v1/chat", tags=["chat"])
openai_router = APIRouter(prefix="/v1", tags=["openai"])


def get_chat_service(request: Request) -> ChatService:
    return request.app.state.container.chat


ChatServiceDep = Annotated[ChatService, Depends(get_chat_service)]
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


async def _sse(events: AsyncIterator[ChatEvent]) -> AsyncIterator[bytes]:
    async for e in events:
        yield format_sse_event(data_str=json.dumps(e.data, ensure_ascii=False), event=e.event)


@router.post(
    "",
    response_model=ChatResponse,
    responses={
        200: {
            "content": {"text/event-stream": {}},
            "description": "JSON, or an SSE stream when `stream` is true: `citations`, "
            "`token`…, `done` (the answer and the citations it uses); a `reset` before "
            "more tokens (the model failed mid-answer, or cited nothing the context held: "
            "the extractive answer follows): discard the tokens shown so far",
        },
        **errors(*AUTHED),
    },
)
async def chat(body: ChatRequest, user: CurrentUser, chat_service: ChatServiceDep):
    """Ask a question about your notes. Autonote retrieves the best sections of YOUR notes,
    numbers them [1], [2], … and answers citing them; `citations` lists only the sections
    the answer cites (note id, title, heading path, character offsets, snippet). Without a
    configured chat model (CHAT_MODEL) the answer quotes the top passages (`mode:
    extractive`)."""
    history = [{"role": m.role, "content": m.content} for m in body.history]
    filters = body.filters.to_filters() if body.filters else None
    if body.stream:
        events = chat_service.stream(user.id, body.message, history, filters)
        return StreamingResponse(
            _sse(events),
            media_type="text/event-stream",
            headers=_SSE_HEADERS,
        )
    result = await chat_service.answer(user.id, body.message, history, filters)
    return ChatResponse(**result_dict(result))


@router.post("/context", response_model=ContextResponse, responses=errors(*AUTHED))
async def chat_context(
    body: ContextRequest, user: CurrentUser, chat_service: ChatServiceDep
) -> ContextResponse:
    """Just the retrieval half of chat: the numbered sections (within the context token
    budget) and their citations, plus Autonote's system prompt — for clients that call
    their own model."""
    filters = body.filters.to_filters() if body.filters else None
    found = await chat_service.context(user.id, body.message, filters)
    return ContextResponse(
        context=found.context,
        citations=[CitationOut(**citation_dict(c)) for c in found.citations],
        system_prompt=SYSTEM_PROMPT,
        warning=found.warning,
    )


@router.post(
    "/completions",
    responses={
        200: {
            "content": {"text/event-stream": {}},
            "description": "A `chat.completion` whose content is the cited answer and its "
            "Sources list, with the extra field `citations`; or, when `stream` is true, "
            "`chat.completion.chunk` events ending with `citations` and `data: [DONE]`",
        },
        **errors(*AUTHED),
    },
)
async def chat_completions(
    body: OpenAIChatRequest, user: CurrentUser, chat_service: ChatServiceDep
):
    """OpenAI-compatible chat (point any OpenAI client's base URL at `/v1`): the same cited
    answer as `POST /v1/chat`, from the last user message and the earlier turns; system
    messages and sampling options are ignored. See docs/chat.md."""
    message, history = openai_compat.question_and_history(body)
    if body.stream:
        events = chat_service.stream(user.id, message, history, None)
        return StreamingResponse(
            openai_compat.chunks(events, body.model),
            media_type="text/event-stream",
            headers=_SSE_HEADERS,
        )
    result = await chat_service.answer(user.id, message, history, None)
    return openai_compat.completion(result, body.model)


@openai_router.get("/models", responses=errors(*AUTHED))
async def list_models(user: CurrentUser) -> dict[str, Any]:
    """The one model OpenAI clients can pick: `autonote` (cited answers from your notes)."""
    return openai_compat.models_list()
