"""`POST /v1/search` and `GET /v1/index/status` — thin: validate, call the service, shape
the response."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from api.indexing.switch import GenerationSwitch
from api.retrieval.schemas import IndexStatusResponse, SearchRequest, SearchResponse
from api.retrieval.service import RetrievalService
from api.schemas import AUTHED, errors
from api.users.auth import CurrentUser

router = APIRouter(tags=["search"])


def get_search_service(request: Request) -> RetrievalService:
    return request.app.state.container.search


SearchServiceDep = Annotated[RetrievalService, Depends(get_search_service)]


def get_switch(request: Request) -> GenerationSwitch:
    return request.app.state.container.indexing.switch


SwitchDep = Annotated[GenerationSwitch, Depends(get_switch)]


@router.post("/v1/search", response_model=SearchResponse, responses=errors(*AUTHED))
async def search(
    body: SearchRequest, user: CurrentUser, search_service: SearchServiceDep
) -> SearchResponse:
    """Hybrid search over your notes' chunks (vector + BM25 keyword, reciprocal rank
    fusion), grouped into notes: each result lists its matching sections with their heading
    breadcrumb and exact character offsets into the note. Only your own notes, only their
    current version. `mode`: `hybrid` (default), `vector` or `keyword`."""
    outcome = await search_service.search(user.id, body.query, **body.options())
    return SearchResponse.from_outcome(outcome)


@router.get(
    "/v1/index/status",
    response_model=IndexStatusResponse,
    responses=errors(*AUTHED),
    tags=["search"],
)
async def index_status(user: CurrentUser, switch: SwitchDep) -> IndexStatusResponse:
    """Progress of re-indexing your notes after a change of embedding model or chunker:
    notes done and left, chunks, tokens embedded so far, estimated tokens, cost (OpenAI
    models, at list price) and time left. Meanwhile search reads your previous index and
    switches to the new one at once when it is complete; with nothing to re-index,
    `switching` is false and everything is done."""
    status = await switch.status(user.id)
    return IndexStatusResponse.model_validate(status)
