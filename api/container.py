"""The service container: every client and service a request or a background task uses,
built once per process from settings. Each `build_*` function makes one part; the app's
lifespan calls `build_container` and closes everything in reverse order on shutdown."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass

import structlog
from bson import ObjectId
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from api.chat.service import ChatService
from api.chunk_store.repository import ChunksRepository
from api.chunking import Chunker
from api.config import Settings
from api.db.client import ensure_indexes, open_database
from api.db.embedded import EmbeddedMongo
from api.db.search import choose_backend
from api.importing.sandbox import ConversionSandbox
from api.importing.service import ImportService
from api.indexing.runtime import (
    Indexing,
    blue_green_for,
    build_indexing,
    build_switch,
    retention_for,
)
from api.indexing.switch import GenerationSwitch, ReindexGate
from api.notes.repository import NotesRepository, NotesSearchQueries
from api.notes.service import NotesService
from api.providers import (
    QueryEmbedders,
    build_chat_client,
    build_chat_model,
    build_chunker,
    build_embedder,
    build_openai_client,
    embedding_model_key,
)
from api.retrieval.backends import AtlasBackend, LocalBackend, SearchBackend
from api.retrieval.local.index import LocalIndex
from api.retrieval.local.sync import LocalIndexSync
from api.retrieval.service import RetrievalService
from api.tokenizer import tiktoken_tokenizer
from api.users.repository import UsersRepository
from api.users.service import UsersService
from connectors.embeddings.base import Embedder

log = structlog.get_logger(__name__)


@dataclass
class Container:
    """Everything a request may need, created once per process."""

    settings: Settings
    client: AsyncMongoClient
    db: AsyncDatabase
    embedded: EmbeddedMongo | None
    embedder: Embedder
    chunker: Chunker
    users: UsersService
    notes: NotesService
    indexing: Indexing
    search: RetrievalService
    chat: ChatService
    imports: ImportService


async def build_container(
    settings: Settings, stack: AsyncExitStack, *, reindex_gate: ReindexGate | None = None
) -> Container:
    """Open the database and build every part; `stack` closes them in reverse order.
    `reindex_gate`: asked before re-indexing into a changed chunker or model begins."""
    client, embedded = await stack.enter_async_context(open_database(settings))
    db = client[settings.mongodb_db]
    await ensure_indexes(db, cache_ttl_days=settings.autonote_embedding_cache_days)
    openai_client = build_openai_client(settings)
    if openai_client is not None:
        stack.push_async_callback(openai_client.close)
    chat_client = build_chat_client(settings, openai_client)
    if chat_client is not None and chat_client is not openai_client:
        stack.push_async_callback(chat_client.close)
    embedder = build_embedder(settings, openai_client)
    stack.push_async_callback(embedder.aclose)
    chunker = build_chunker(settings, embedder)
    # Before the search index loads and before any run: who reads which generation.
    switch = build_switch(settings, db, chunker=chunker, embedder=embedder)
    await switch.prepare(reindex_gate)
    queries = QueryEmbedders(settings, openai_client)
    stack.push_async_callback(queries.aclose)
    search, sync = await build_search(settings, db, embedder, switch=switch, queries=queries)
    if sync is not None:
        stack.push_async_callback(sync.stop)
    indexing = build_indexing(
        settings,
        db,
        chunker=chunker,
        embedder=embedder,
        concurrency=settings.autonote_index_workers,
        listeners=[sync.refresh_note] if sync is not None else [],
        commit_scope=sync.committing if sync is not None else None,
        retain_s=retention_for(settings, search.backend.name),
        switch=switch,
        blue_green=blue_green_for(settings, search.backend.name),
    )
    notes = build_notes(settings, db, chunker, indexing, sync)
    return Container(
        settings=settings,
        client=client,
        db=db,
        embedded=embedded,
        embedder=embedder,
        chunker=chunker,
        users=build_users(settings, db),
        notes=notes,
        indexing=indexing,
        search=search,
        chat=ChatService(
            search,
            build_chat_model(settings, chat_client),
            tiktoken_tokenizer("cl100k_base").count,
            context_tokens=settings.chat_context_tokens,
            min_relevance=settings.chat_min_relevance,
        ),
        imports=build_imports(settings, notes),
    )


def build_users(settings: Settings, db: AsyncDatabase) -> UsersService:
    admin = settings.autonote_admin_token
    return UsersService(
        UsersRepository(db),
        admin_token=admin.get_secret_value() if admin else None,
        rate_per_minute=settings.autonote_rate_limit_per_minute,
        admin_guesses_per_minute=settings.autonote_admin_guesses_per_minute,
    )


async def build_search(
    settings: Settings,
    db: AsyncDatabase,
    embedder: Embedder,
    *,
    switch: GenerationSwitch,
    queries: QueryEmbedders,
) -> tuple[RetrievalService, LocalIndexSync | None]:
    """The search backend SEARCH_BACKEND asks for (auto: probe the server), loaded. On the
    local backend, users whose notes are being re-indexed into a new generation keep
    reading their previous one (`switch` tells who, and who switched since)."""
    backend_name = await choose_backend(
        db,
        settings.search_backend,
        vector_index=settings.atlas_vector_index,
        text_index=settings.atlas_text_index,
    )
    sync = None
    backend: SearchBackend
    if backend_name == "local":
        index = LocalIndex(embedder.dimensions)
        sync = LocalIndexSync(
            db,
            index,
            model_key=embedding_model_key(embedder),
            poll_s=settings.autonote_search_poll_s,
            # Untracked without blue/green: each note is served once its new model made it.
            generation=switch.target.key if settings.autonote_blue_green else None,
        )
        await sync.start()
        switch.on_switch.append(sync.switched)
        for older in sync.serving.older():  # load previous models now, not on a query
            if queries(older.model_key) is None:
                log.warning("search.previous_model_unavailable", model=older.model_key)
        backend = LocalBackend(index, catch_up=sync.catch_up, serving=sync.serving)
    else:
        backend = AtlasBackend(
            db, vector_index=settings.atlas_vector_index, text_index=settings.atlas_text_index
        )
    log.info("search.backend", backend=backend_name)
    service = RetrievalService(
        backend,
        embedder,
        NotesSearchQueries(db),
        chunking_enabled=settings.chunking_enabled,
        query_embedders=queries,
    )
    return service, sync


def build_notes(
    settings: Settings,
    db: AsyncDatabase,
    chunker: Chunker,
    indexing: Indexing,
    sync: LocalIndexSync | None,
) -> NotesService:
    """The notes service; a changed note wakes the workers (or, with CHUNKING_ASYNC=false,
    is indexed before the write returns)."""

    async def on_change(note_id: ObjectId) -> bool:
        if settings.chunking_async:
            indexing.workers.wake()
            return False
        await indexing.workers.index_now(note_id, settings.autonote_sync_index_timeout_s)
        return True

    return NotesService(
        NotesRepository(db),
        ChunksRepository(db),
        max_note_bytes=settings.autonote_max_note_bytes,
        max_tags=settings.autonote_max_tags,
        max_tag_length=settings.autonote_max_tag_length,
        chunking_enabled=settings.chunking_enabled,
        chunking_strategy=chunker.strategy,
        chunking_version=chunker.version,
        on_change=on_change,
        on_purge=sync.remove if sync is not None else None,
    )


def build_imports(settings: Settings, notes: NotesService) -> ImportService:
    return ImportService(
        notes,
        max_file_bytes=settings.autonote_max_import_file_bytes,
        max_files=settings.autonote_max_import_files,
        sandbox=ConversionSandbox(
            timeout_s=settings.autonote_import_timeout_s,
            memory_mb=settings.autonote_import_memory_mb,
        ),
    )
