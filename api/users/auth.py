"""Who is asking: the `CurrentUser` and admin dependencies every `/v1` route uses."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.errors import ValidationFailed
from api.users.service import UsersService
from api.users.types import User

# Declared for the OpenAPI document (the "Authorize" button); validation is ours, so that
# missing and malformed headers both get our 401 body.
_bearer = HTTPBearer(auto_error=False, description="API key: `Authorization: Bearer <key>`")
_admin_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="AdminToken",
    description="Admin routes: `Authorization: Bearer <AUTONOTE_ADMIN_TOKEN>`",
)


def get_users_service(request: Request) -> UsersService:
    return request.app.state.container.users


UsersServiceDep = Annotated[UsersService, Depends(get_users_service)]


async def current_user(
    request: Request,
    users: UsersServiceDep,
    _creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> User:
    """The user whose API key is in the Authorization header (401 otherwise, 429 if over
    the per-key rate limit). Then the query string is checked (`reject_unknown_query_params`):
    who is asking comes before what is asked."""
    # Usually resolved already, before the body was read (`AuthenticateFirstMiddleware`).
    user = getattr(request.state, "user", None) or await users.authenticate(
        request.headers.get("authorization")
    )
    request.state.user_id = str(user.id)
    reject_unknown_query_params(request)
    return user


CurrentUser = Annotated[User, Depends(current_user)]


async def require_admin(
    request: Request,
    users: UsersServiceDep,
    _creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_admin_bearer)],
) -> None:
    """Admin routes: `Authorization: Bearer <AUTONOTE_ADMIN_TOKEN>` (403 when the admin API
    is disabled, 401 for a wrong token, 429 once a client has sent too many wrong ones).
    Checked before the body is read (`AuthenticateFirstMiddleware`), here only when that
    could not run."""
    if not getattr(request.state, "admin_checked", False):
        client = request.client.host if request.client else ""
        users.check_admin(request.headers.get("authorization"), client=client)
    reject_unknown_query_params(request)


def reject_unknown_query_params(request: Request) -> None:
    """422 for query parameters the route does not define: a typo such as `?tags=x` for
    `?tag=x` must not silently widen a listing or a search. Called once the caller is
    authenticated (every `/v1` route); the probes and `/metrics` ignore query strings."""
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
