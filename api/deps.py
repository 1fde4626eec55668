"""The service container built in the lifespan, and the `Annotated` dependencies routes use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from api.config import Settings
from api.db.embedded import EmbeddedMongo
from api.indexing.runtime import Indexing
from api.notes.service import NotesService
from api.users.models import User
from api.users.service import UsersService


@dataclass
class Container:
    """Everything a request may need, created once per process in the lifespan."""

    settings: Settings
    client: AsyncMongoClient
    db: AsyncDatabase
    users: UsersService
    notes: NotesService
    indexing: Indexing | None = None
    embedder: Any = None  # connectors.embeddings.base.Embedder
    chunker: Any = None  # api.services.chunking strategy object
    search: Any = None  # api.retrieval.service.RetrievalService
    chat: Any = None  # api.chat.service.ChatService
    imports: Any = None  # api.notes.imports.ImportService
    embedded: EmbeddedMongo | None = None


async def get_container(request: Request) -> Container:
    return request.app.state.container


ContainerDep = Annotated[Container, Depends(get_container)]

# Declared for the OpenAPI document (the "Authorize" button); validation is ours, so that
# missing and malformed headers both get our 401 body.
_bearer = HTTPBearer(auto_error=False, description="API key: `Authorization: Bearer <key>`")
_admin_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="AdminToken",
    description="Admin routes: `Authorization: Bearer <AUTONOTE_ADMIN_TOKEN>`",
)


async def current_user(
    request: Request,
    container: ContainerDep,
    _creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> User:
    """The user whose API key is in the Authorization header (401 otherwise, 429 if over
    the per-key rate limit). Then the query string is checked (`reject_unknown_query_params`):
    who is asking comes before what is asked."""
    # Usually resolved already, before the body was read (`AuthenticateFirstMiddleware`).
    user = getattr(request.state, "user", None) or await container.users.authenticate(
        request.headers.get("authorization")
    )
    request.state.user_id = str(user.id)
    reject_unknown_query_params(request)
    return user


CurrentUser = Annotated[User, Depends(current_user)]


async def require_admin(
    request: Request,
    container: ContainerDep,
    _creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_admin_bearer)],
) -> None:
    """Admin routes: `Authorization: Bearer <AUTONOTE_ADMIN_TOKEN>` (403 when the admin API
    is disabled, 401 for a wrong token, 429 once a client has sent too many wrong ones).
    Checked before the body is read (`AuthenticateFirstMiddleware`), here only when that
    could not run."""
    if not getattr(request.state, "admin_checked", False):
        client = request.client.host if request.client else ""
        container.users.check_admin(request.headers.get("authorization"), client=client)
    reject_unknown_query_params(request)


def reject_unknown_query_params(request: Request) -> None:
    """422 for query parameters the route does not define: a typo such as `?tags=x` for
    `?tag=x` must not silently widen a listing or a search. Called once the caller is
    authenticated (every `/v1` route); the probes and `/metrics` ignore query strings."""
    from api.errors import ValidationFailed

    dependant = getattr(request.scope.get("route"), "dependant", None)
    if dependant is None or not request.query_params:
        return
    allowed: set[str] = set()
    stack = [dependant]
    while stack:
        node = stack.pop()
        allowed.update(p.alias for p in node.query_params)
        stack.extend(node.dependencies)
    unknown = sorted(set(request.query_params) - allowed)
    if unknown:
        raise ValidationFailed(
            f"unknown query parameter(s): {', '.join(map(repr, unknown))}; "
            f"allowed: {', '.join(sorted(allowed)) or 'none'}"
        )


async def get_notes_service(container: ContainerDep) -> NotesService:
    return container.notes


NotesServiceDep = Annotated[NotesService, Depends(get_notes_service)]
