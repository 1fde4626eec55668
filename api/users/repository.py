"""All queries on the `users` and `api_keys` collections."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from api.db.ids import new_object_id
from api.schemas import name_key


class NameTaken(Exception):
    """Another user has this name (compared as `api.schemas.name_key` compares names)."""


class UsersRepository:
    """Users and their hashed API keys."""

    def __init__(self, db: AsyncDatabase) -> None:
        self._users = db.users
        self._keys = db.api_keys

    async def count_users(self) -> int:
        return await self._users.count_documents({}, limit=1)

    async def insert_user(self, name: str, now: datetime, *, default: bool = False) -> ObjectId:
        """Insert a user. `default=True` marks the one created on an empty database: a
        unique index on the mark lets only one process create it (DuplicateKeyError)."""
        doc: dict[str, Any] = {
            "_id": new_object_id(),
            "name": name,
            "name_key": name_key(name),
            "created_at": now,
        }
        if default:
            doc["default_user"] = True
        try:
            result = await self._users.insert_one(doc)
        except DuplicateKeyError as exc:
            if "name_key" in str(exc.details or exc):
                raise NameTaken(name) from None
            raise
        return result.inserted_id

    async def delete_user(self, user_id: ObjectId) -> None:
        """Undo `insert_user` (its key could not be stored); the user has no keys."""
        await self._users.delete_one({"_id": user_id})

    async def get_user(self, user_id: ObjectId) -> dict[str, Any] | None:
        return await self._users.find_one({"_id": user_id})

    async def insert_key(
        self, user_id: ObjectId, key_hash: str, prefix: str, now: datetime
    ) -> ObjectId:
        result = await self._keys.insert_one(
            {
                "_id": new_object_id(),
                "user_id": user_id,
                "key_hash": key_hash,
                "prefix": prefix,
                "created_at": now,
                "revoked_at": None,
            }
        )
        return result.inserted_id

    async def find_active_key(self, key_hash: str) -> dict[str, Any] | None:
        return await self._keys.find_one({"key_hash": key_hash, "revoked_at": None})

    async def revoke_key(self, key_id: ObjectId, now: datetime) -> bool:
        result = await self._keys.update_one(
            {"_id": key_id, "revoked_at": None}, {"$set": {"revoked_at": now}}
        )
        return result.modified_count == 1
