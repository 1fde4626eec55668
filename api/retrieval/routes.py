"""`POST /v1/search` — thin: validate, call the service, shape the response."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from api.retrieval.schemas import NoteHit, SearchRequest, SearchResponse
from api.retrieval.service import RetrievalService
from api.schemas import AUTHED, errors
from api.users.auth import CurrentUser

router = APIRouter(tags=["search"])


def get_search_service(request: Request) -> RetrievalService:
    return request.app.state.container.search


SearchServiceDep = Annotated[RetrievalService, Depends(get_search_service)]


@router.post("/v1/search", response_model=SearchResponse, responses=errors(*AUTHED))
async def search(
    body: SearchRequest, user: CurrentUser, search_service: SearchServiceDep
) -> SearchResponse:
    """Hybrid search over your notes' chunks (vector + BM25 keyword, reciprocal rank
    fusion), grouped into notes: each result lists its matching sections with their heading
    breadcrumb and exact character offsets into the note. Only your own notes, only their
    current version. `mode`: `hybrid` (default), `vector` or `keyword`."""
    outcome = await search_service.search(
        user.id,
        body.query,
        limit=body.limit,
        chunks_per_note=body.chunks_per_note,
        mode=body.mode,
        filters=body.filters.to_filters() if body.filters else None,
    )
    return SearchResponse(
        results=[NoteHit.from_result(r) for r in outcome.results],
        took_ms=outcome.took_ms,
        mode=outcome.mode,
        backend=outcome.backend,
        warning=outcome.warning,
    )
