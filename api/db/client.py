"""The AsyncMongoClient and every index the app relies on, created idempotently."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import structlog
from pymongo import ASCENDING, DESCENDING, AsyncMongoClient, IndexModel
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import (
    AutoReconnect,
    ConnectionFailure,
    DuplicateKeyError,
    ExecutionTimeout,
    NetworkTimeout,
    OperationFailure,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
    WTimeoutError,
)

from api.chunk_store.generations import SEARCH_GENERATIONS_INDEXES, backfill_generations
from api.config import Settings
from api.db.embedded import EmbeddedMongo, embedded_server
from api.observability import MongoSpanListener
from api.schemas import name_key

log = structlog.get_logger(__name__)

# Errors that mean "the database is unreachable or too slow right now", rendered as 503.
UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (
    ServerSelectionTimeoutError,
    AutoReconnect,
    ConnectionFailure,
    NetworkTimeout,
    ExecutionTimeout,
    WaitQueueTimeoutError,
    WTimeoutError,
)


def is_unavailable(exc: BaseException) -> bool:
    """True for connectivity/timeouts (retry later), False for real query errors."""
    from pymongo.errors import PyMongoError

    if isinstance(exc, UNAVAILABLE_ERRORS):
        return True
    return isinstance(exc, PyMongoError) and exc.timeout  # CSOT timeouts


@asynccontextmanager
async def open_database(
    settings: Settings, *, must_exist: bool = False
) -> AsyncIterator[tuple[AsyncMongoClient, EmbeddedMongo | None]]:
    """A client for MONGODB_URL, or else for the embedded server of AUTONOTE_DATA_DIR
    (attached or started, kept up while open: `embedded_server`), with the embedded server
    or None. At the end the client is closed, and the server stopped if this process
    started it. `must_exist`: refuse a data directory that holds no database."""
    async with AsyncExitStack() as stack:
        embedded = None
        url = settings.mongodb_url
        if url is None:
            embedded = await stack.enter_async_context(
                embedded_server(settings.autonote_data_dir, must_exist=must_exist)
            )
            url = embedded.url
        client = create_client(url, timeout_ms=settings.mongodb_timeout_ms)
        stack.push_async_callback(client.close)
        yield client, embedded


def create_client(
    url: str, *, timeout_ms: int = 3000, app_name: str = "autonote"
) -> AsyncMongoClient:
    """A client that fails fast when the server is gone instead of hanging requests."""
    return AsyncMongoClient(
        url,
        appname=app_name,
        tz_aware=True,
        serverSelectionTimeoutMS=timeout_ms,
        connectTimeoutMS=timeout_ms,
        # Not `timeoutMS`: with a client-wide operation timeout PyMongo bounds server
        # selection by the operation's remaining time and ignores serverSelectionTimeoutMS,
        # so with the server down every request would wait the whole operation timeout
        # before its 503. A socket timeout still bounds a server that accepts a request and
        # never answers.
        socketTimeoutMS=max(timeout_ms * 5, 15_000),
        retryWrites=True,
        event_listeners=[MongoSpanListener()],
    )


NOTES_INDEXES = [
    IndexModel(
        [
            ("author_id", ASCENDING),
            ("status", ASCENDING),
            ("created_at", DESCENDING),
            ("_id", DESCENDING),
        ],
        name="author_status_created",
    ),
    IndexModel(
        [("author_id", ASCENDING), ("tags", ASCENDING), ("created_at", DESCENDING)],
        name="author_tags_created",
    ),
    # A client's key for a note is unique per user (`external_id`, optional). The partial
    # unique index is the constraint; the second index serves lookups and prefix listings
    # (the embedded server never plans with a partial index, it would scan every note).
    IndexModel(
        [("author_id", ASCENDING), ("external_id", ASCENDING)],
        name="author_external_id_unique",
        unique=True,
        partialFilterExpression={"external_id": {"$type": "string"}},
    ),
    IndexModel(
        [("author_id", ASCENDING), ("external_id", ASCENDING), ("status", ASCENDING)],
        name="author_external_id_status",
    ),
    # The reconciler's queue: claimable notes by state and due time.
    IndexModel([("index_status", ASCENDING), ("next_attempt_at", ASCENDING)], name="index_queue"),
    # Users take turns (api.indexing.fairness): who has queued notes, each one's most overdue.
    IndexModel(
        [("index_status", ASCENDING), ("author_id", ASCENDING), ("next_attempt_at", ASCENDING)],
        name="index_queue_author",
    ),
    IndexModel([("lease_expires_at", ASCENDING)], name="index_lease", sparse=True),
    IndexModel([("evict_pending", ASCENDING)], name="index_evict_pending", sparse=True),
    # Every process's local search index polls commits by `indexed_at`, twice a second
    # (without it, each poll scanned every note).
    IndexModel([("indexed_at", ASCENDING)], name="indexed_at"),
    # Blue/green re-indexing: a user's notes not yet in the configured generation (is the
    # user's new index complete?), and the notes still missing the field.
    IndexModel(
        [("generation", ASCENDING), ("author_id", ASCENDING), ("status", ASCENDING)],
        name="generation_author_status",
    ),
]

CHUNK_UNIQUE_INDEX = "note_generation_version_chunk_unique"
# Unique per (note_id, note_version, chunk_index), from before generations: it would refuse
# a new generation's chunks beside the old ones. Replaced on startup (`_chunks_by_generation`).
_LEGACY_CHUNK_UNIQUE_INDEX = "note_version_chunk_unique"

NOTE_CHUNKS_INDEXES = [
    # Chunks by note, by note and position, by version, and by note and version ...
    IndexModel([("note_id", ASCENDING)], name="note_id_1"),
    IndexModel(
        [("note_id", ASCENDING), ("chunk_index", ASCENDING)], name="note_id_1_chunk_index_1"
    ),
    IndexModel([("note_version", ASCENDING)], name="note_version_1"),
    IndexModel(
        [("note_id", ASCENDING), ("note_version", ASCENDING)], name="note_id_1_note_version_1"
    ),
    # ... plus uniqueness of a chunk within a version of one generation (two generations of
    # a version live side by side while a new model or chunker is built), and per-user
    # loading.
    IndexModel(
        [
            ("note_id", ASCENDING),
            ("generation", ASCENDING),
            ("note_version", ASCENDING),
            ("chunk_index", ASCENDING),
        ],
        name=CHUNK_UNIQUE_INDEX,
        unique=True,
    ),
    IndexModel([("author_id", ASCENDING), ("note_id", ASCENDING)], name="author_note"),
    # Embedding reuse across an author's notes looks chunks up by the hash of their text.
    IndexModel(
        [("author_id", ASCENDING), ("embedding_model", ASCENDING), ("content_hash", ASCENDING)],
        name="author_model_hash",
    ),
    # A user's chunks of other generations (dropped when the user switches), the chunks
    # still missing the field, and which generations exist.
    IndexModel([("generation", ASCENDING), ("author_id", ASCENDING)], name="generation_author"),
]

USERS_INDEXES = [
    IndexModel([("created_at", ASCENDING)], name="created_at"),
    # Only the user created on an empty database has the field: two processes starting
    # on it together create one.
    IndexModel([("default_user", ASCENDING)], name="default_user_unique", unique=True, sparse=True),
    # One user per name (`name_key`); sparse, so a user from before the field is not indexed
    # until `_key_user_names` gives it one.
    IndexModel([("name_key", ASCENDING)], name="name_key_unique", unique=True, sparse=True),
]
API_KEYS_INDEXES = [
    IndexModel([("key_hash", ASCENDING)], name="key_hash_unique", unique=True),
    IndexModel([("user_id", ASCENDING)], name="user_id"),
]
EMBEDDING_CACHE_INDEXES = [
    IndexModel(
        [("author_id", ASCENDING), ("model", ASCENDING), ("content_hash", ASCENDING)],
        name="author_model_hash_unique",
        unique=True,
    ),
]
# Before the cache was scoped by author: unique per (model, hash), which would now refuse
# two authors' copies of one text. Replaced on startup (see `_scope_cache_by_author`).
_LEGACY_CACHE_INDEX = "model_hash_unique"


async def _scope_cache_by_author(db: AsyncDatabase) -> None:
    """The embedding cache's unique index is per (author, model, hash). A database from
    before has one per (model, hash): the new index is created FIRST (while the old one
    still forbids two author-less copies of a hash, so creating it cannot fail), then the
    old one is dropped, then the author-less entries, which no lookup matches any more.
    The cache only saves embedding calls: emptying it loses no data."""
    await db.embedding_cache.create_indexes(EMBEDDING_CACHE_INDEXES)
    try:
        await db.embedding_cache.drop_index(_LEGACY_CACHE_INDEX)
    except OperationFailure as exc:
        if exc.code not in (26, 27):  # NamespaceNotFound / IndexNotFound
            raise
    # Also when an earlier start already dropped the index (an older build of this step).
    removed = await db.embedding_cache.delete_many({"author_id": {"$exists": False}})
    if removed.deleted_count:
        log.info("db.embedding_cache_scoped", legacy_entries_removed=removed.deleted_count)


async def _key_user_names(db: AsyncDatabase) -> None:
    """Give every user from before `name_key` one, oldest first. A later user whose name an
    older one already holds keeps none (a warning names it): nothing is renamed or lost."""
    async for user in db.users.find({"name_key": {"$exists": False}}).sort("created_at", 1):
        try:
            await db.users.update_one(
                {"_id": user["_id"]}, {"$set": {"name_key": name_key(user["name"])}}
            )
        except DuplicateKeyError:
            log.warning("db.user_name_taken", user_id=str(user["_id"]), name=user["name"])


async def _chunks_by_generation(db: AsyncDatabase) -> None:
    """Chunks are unique per (note, generation, version, index). The new unique index is
    created FIRST (chunks unique under the old index are unique under the new one, even
    before they have a `generation`), then the old one is dropped, then chunks and notes
    written before generations get theirs (`backfill_generations`)."""
    await db.note_chunks.create_indexes(NOTE_CHUNKS_INDEXES)
    try:
        await db.note_chunks.drop_index(_LEGACY_CHUNK_UNIQUE_INDEX)
    except OperationFailure as exc:
        if exc.code not in (26, 27):  # NamespaceNotFound / IndexNotFound
            raise
    chunks, notes = await backfill_generations(db)
    if chunks or notes:
        log.info("db.generations_backfilled", chunks=chunks, notes=notes)


async def ensure_indexes(db: AsyncDatabase, *, cache_ttl_days: int = 30) -> None:
    """Create every index the app relies on. Idempotent: existing indexes are left as they
    are, except the embedding cache's TTL, which follows `cache_ttl_days`."""
    await db.notes.create_indexes(NOTES_INDEXES)
    await _chunks_by_generation(db)
    log.info("note_chunks_indexes_created", count=len(NOTE_CHUNKS_INDEXES))
    await db.search_generations.create_indexes(SEARCH_GENERATIONS_INDEXES)
    await db.users.create_indexes(USERS_INDEXES)
    await _key_user_names(db)
    await db.api_keys.create_indexes(API_KEYS_INDEXES)
    await _scope_cache_by_author(db)
    ttl = cache_ttl_days * 86_400
    try:
        await db.embedding_cache.create_index(
            "cached_at", name="cached_at_ttl", expireAfterSeconds=ttl
        )
    except OperationFailure as exc:
        if exc.code not in (85, 86):  # IndexOptionsConflict / IndexKeySpecsConflict
            raise
        await db.command(
            "collMod", "embedding_cache", index={"name": "cached_at_ttl", "expireAfterSeconds": ttl}
        )
    log.info("db.indexes_ensured", database=db.name)
