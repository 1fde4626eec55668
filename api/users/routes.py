"""Admin routes (`/v1/admin`, bearer AUTONOTE_ADMIN_TOKEN) and `/v1/me`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Response, status

from api.db.ids import parse_object_id
from api.errors import BadRequest
from api.schemas import ADMIN, AUTHED, OBJECT_ID_PATTERN, errors
from api.users.auth import CurrentUser, UsersServiceDep, require_admin
from api.users.schemas import ApiKeyOut, Me, UserCreate, UserCreated

router = APIRouter(tags=["users"])


def _oid(value: str, what: str):
    oid = parse_object_id(value)
    if oid is None:
        raise BadRequest(f"invalid {what}: expected 24 hexadecimal characters")
    return oid


@router.post(
    "/v1/admin/users",
    status_code=status.HTTP_201_CREATED,
    response_model=UserCreated,
    responses=errors(409, *ADMIN),
    dependencies=[Depends(require_admin)],
)
async def create_user(body: UserCreate, users: UsersServiceDep) -> UserCreated:
    """Create a user and return its first API key. The key is shown only here; it is stored
    as a SHA-256 hash. Needs `Authorization: Bearer <AUTONOTE_ADMIN_TOKEN>`."""
    return await users.create_user(body.name)


@router.post(
    "/v1/admin/users/{user_id}/keys",
    status_code=status.HTTP_201_CREATED,
    response_model=ApiKeyOut,
    responses=errors(404, *ADMIN),
    dependencies=[Depends(require_admin)],
)
async def issue_key(
    user_id: Annotated[str, Path(pattern=OBJECT_ID_PATTERN)],
    users: UsersServiceDep,
) -> ApiKeyOut:
    """Issue an additional API key for a user (for rotation)."""
    return await users.issue_key(_oid(user_id, "user id"))


@router.delete(
    "/v1/admin/keys/{key_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=errors(404, *ADMIN),
    dependencies=[Depends(require_admin)],
)
async def revoke_key(
    key_id: Annotated[str, Path(pattern=OBJECT_ID_PATTERN)],
    users: UsersServiceDep,
) -> Response:
    """Revoke an API key; requests with it get 401 from now on."""
    await users.revoke_key(_oid(key_id, "key id"))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/v1/me", response_model=Me, responses=errors(*AUTHED))
async def me(user: CurrentUser) -> Me:
    """The user the API key belongs to."""
    return Me(
        user_id=str(user.id), name=user.name, key_id=str(user.key_id) if user.key_id else None
    )
