"""Users, API keys (stored as SHA-256 hashes), authentication and per-key rate limiting."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import math
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import structlog
from bson import ObjectId
from pymongo.errors import DuplicateKeyError

from api.errors import (
    Conflict,
    Forbidden,
    NotFound,
    RateLimited,
    Unauthorized,
    ValidationFailed,
)
from api.users.repository import NameTaken, UsersRepository
from api.users.schemas import ApiKeyOut, UserCreated, clean_user_name
from api.users.types import User

log = structlog.get_logger(__name__)

KEY_PREFIX = "an_"


def hash_key(raw: str) -> str:
    """Keys are 256-bit random secrets, so a fast hash is enough (no password stretching)."""
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


MAX_TRACKED_KEYS = 10_000


@dataclass
class TokenBucket:
    """Per-key limiter: `rate_per_minute` sustained, bursts up to the same amount."""

    rate_per_minute: int
    _state: dict[str, tuple[float, float]] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic  # seconds; tests substitute their own

    def take(self, key: str) -> int | None:
        """Consume one token; return seconds to wait when empty, None when allowed."""
        if self.rate_per_minute <= 0:
            return None
        now = self.clock()
        tokens = self._tokens(key, now)
        wait = self._wait(tokens)
        if key not in self._state and len(self._state) >= MAX_TRACKED_KEYS:
            self._forget_refilled(now)
        self._state[key] = (tokens if wait else tokens - 1.0, now)
        return wait

    def _forget_refilled(self, now: float) -> None:
        """Drop the keys whose budget is full again (a full bucket is what a key never seen
        gets), so the table stays bounded even when a client picks its addresses (through a
        trusted `X-Forwarded-For`) for wrong admin tokens."""
        full = float(self.rate_per_minute)
        self._state = {k: v for k, v in self._state.items() if self._tokens(k, now) < full}

    def empty(self, key: str) -> int | None:
        """Seconds until `key` has a token again, None when it has one (nothing consumed)."""
        if self.rate_per_minute <= 0 or key not in self._state:
            return None
        return self._wait(self._tokens(key, self.clock()))

    def _tokens(self, key: str, now: float) -> float:
        """`key`'s tokens at `now`: refilled since its last request, at most the capacity."""
        capacity = float(self.rate_per_minute)
        tokens, last = self._state.get(key, (capacity, now))
        return min(capacity, tokens + (now - last) * capacity / 60.0)

    def _wait(self, tokens: float) -> int | None:
        """Whole seconds until there is one token, None when there is one now."""
        if tokens >= 1.0:
            return None
        return max(1, math.ceil((1.0 - tokens) / (self.rate_per_minute / 60.0)))


def _write_secret(path: Path, secret: str) -> Path:
    """Write `secret` to `path` readable by the owner only. A new file (mode 0600 from the
    start) replaces the old one: opening an existing file keeps its mode, and would
    follow a symlink planted in its place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secret + "\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


class UsersService:
    """Creates users and keys; turns a bearer token into a `User`."""

    def __init__(
        self,
        repo: UsersRepository,
        *,
        admin_token: str | None,
        rate_per_minute: int,
        admin_guesses_per_minute: int = 30,
    ) -> None:
        self._repo = repo
        self._admin_token = admin_token
        self._limiter = TokenBucket(rate_per_minute)
        # Wrong admin tokens, per client address: the token is chosen by an operator and
        # may be guessable, and no API key (hence no per-key limit) is involved.
        # Their own budget (AUTONOTE_ADMIN_GUESSES_PER_MINUTE), at most the per-key rate:
        # AUTONOTE_RATE_LIMIT_PER_MINUTE=0 turns the per-key limit off, not this one.
        guesses = admin_guesses_per_minute
        self._admin_failures = TokenBucket(
            min(rate_per_minute, guesses) if rate_per_minute > 0 else guesses
        )

    def check_admin(self, authorization: str | None, *, client: str = "") -> None:
        """Admin routes need `Bearer <AUTONOTE_ADMIN_TOKEN>`; without it configured they are
        disabled (403). A client that sent more wrong tokens than the per-minute rate gets
        429 for every admin request, the right token included, until its budget refills:
        otherwise guessing at full speed would still find the token."""
        if not self._admin_token:
            raise Forbidden("admin API disabled: set AUTONOTE_ADMIN_TOKEN to enable it")
        wait = self._admin_failures.empty(client)
        if wait is not None:
            raise RateLimited(wait)
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            token.encode(), self._admin_token.encode()
        ):
            self._admin_failures.take(client)
            raise Unauthorized("invalid admin token")

    async def create_user(self, name: str, *, default: bool = False) -> UserCreated:
        """Create a user and its first key. If the key cannot be stored the user is removed
        again, so a failed request leaves no user that no key can reach (and a retry does
        not make a second one)."""
        try:
            name = clean_user_name(name)
        except ValueError as exc:
            raise ValidationFailed(str(exc)) from None
        now = datetime.now(UTC)
        try:
            user_id = await self._repo.insert_user(name, now, default=default)
        except NameTaken:
            raise Conflict(f"a user named {name!r} exists") from None
        try:
            key = await self.issue_key(user_id, now=now)
        except BaseException:
            with contextlib.suppress(Exception):
                await self._repo.delete_user(user_id)
            raise
        log.info("user.created", user_id=str(user_id), key_id=key.key_id)
        return UserCreated(name=name, **key.model_dump())

    async def issue_key(self, user_id: ObjectId, *, now: datetime | None = None) -> ApiKeyOut:
        now = now or datetime.now(UTC)
        if await self._repo.get_user(user_id) is None:
            raise NotFound("user not found")
        raw = KEY_PREFIX + secrets.token_urlsafe(32)
        key_id = await self._repo.insert_key(user_id, hash_key(raw), raw[:8], now)
        return ApiKeyOut(user_id=str(user_id), key_id=str(key_id), api_key=raw, created_at=now)

    async def revoke_key(self, key_id: ObjectId) -> None:
        if not await self._repo.revoke_key(key_id, datetime.now(UTC)):
            raise NotFound("api key not found or already revoked")
        log.info("api_key.revoked", key_id=str(key_id))

    async def authenticate(self, authorization: str | None) -> User:
        """Resolve `Authorization: Bearer <key>`; 401 for missing/malformed/unknown/revoked."""
        if not authorization:
            raise Unauthorized("missing Authorization header (expected: Bearer <api key>)")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token or len(token) > 256:
            raise Unauthorized("malformed Authorization header (expected: Bearer <api key>)")
        doc = await self._repo.find_active_key(hash_key(token))
        if doc is None:
            raise Unauthorized("invalid or revoked api key")
        wait = self._limiter.take(str(doc["_id"]))
        if wait is not None:
            raise RateLimited(wait)
        user = await self._repo.get_user(doc["user_id"])
        if user is None:
            raise Unauthorized("invalid or revoked api key")
        return User(id=user["_id"], name=user["name"], key_id=doc["_id"])

    async def ensure_default_user(self, data_dir: Path) -> str | None:
        """On an empty database, create user "default" and write its key to `api_key`.

        Returns the key when one was created (the caller prints it once), else None.
        """
        if await self._repo.count_users() > 0:
            return None
        try:
            created = await self.create_user("default", default=True)
        except DuplicateKeyError:  # another process, starting at the same time, made it
            return None
        key_file = _write_secret(data_dir / "api_key", created.api_key)
        log.info("user.default_created", user_id=created.user_id, key_file=str(key_file))
        return created.api_key
