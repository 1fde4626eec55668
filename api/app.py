"""The FastAPI application: `create_app()` wires routes, middleware, error handlers and a
lifespan that owns every client (database, embedded server, models, workers)."""

from __future__ import annotations

import copy
import hmac
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pymongo
import structlog
from bson import ObjectId
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from pymongo.asynchronous.database import AsyncDatabase

from api.chat.routes import router as chat_router
from api.chat.schemas import CHAT_MAX_BODY_BYTES
from api.chat.service import ChatService
from api.config import Settings, load_settings
from api.db.client import ensure_indexes, open_database
from api.deps import Container, ContainerDep
from api.error_handlers import install_error_handlers
from api.errors import DatabaseUnavailable, Unauthorized
from api.indexing.chunks_repository import ChunksRepository
from api.indexing.runtime import build_indexing
from api.logging import configure_logging
from api.middleware import (
    AuthenticateFirstMiddleware,
    BodyLimitMiddleware,
    RequestContextMiddleware,
)
from api.notes.conversion import ConversionSandbox
from api.notes.imports import ImportService
from api.notes.repository import NotesRepository, NotesSearchQueries
from api.notes.routes import router as notes_router
from api.notes.service import NotesService
from api.observability import setup_telemetry
from api.providers import (
    build_chat_model,
    build_chunker,
    build_embedder,
    build_openai_client,
    embedding_model_key,
)
from api.retrieval.backends import AtlasBackend, LocalBackend, detect_backend
from api.retrieval.local_index import LocalIndex
from api.retrieval.routes import router as search_router
from api.retrieval.schemas import SEARCH_MAX_BODY_BYTES
from api.retrieval.service import RetrievalService
from api.retrieval.sync import LocalIndexSync
from api.schemas import ErrorBody
from api.services.chunking.tokenizer import tiktoken_tokenizer
from api.users.repository import UsersRepository
from api.users.routes import router as users_router
from api.users.service import UsersService

log = structlog.get_logger(__name__)


def _banner(key: str, key_file: str, base_url: str) -> None:
    print(
        "\n" + "=" * 72 + "\nAutonote created a default user. Its API key (shown once, also saved"
        f" in {key_file}):\n\n    {key}\n\nTry:  curl -H 'Authorization: Bearer {key}' "
        f"{base_url}/v1/notes\n" + "=" * 72 + "\n",
        flush=True,
    )


async def build_search(
    settings: Settings, db: AsyncDatabase, embedder: Any
) -> tuple[RetrievalService, LocalIndexSync | None]:
    """The search backend SEARCH_BACKEND asks for (auto: probe the server), loaded."""
    backend_name = settings.search_backend
    if backend_name == "auto":
        backend_name = await detect_backend(db)
    sync = None
    backend: Any
    if backend_name == "local":
        index = LocalIndex(embedder.dimensions)
        sync = LocalIndexSync(
            db,
            index,
            model_key=embedding_model_key(embedder),
            poll_s=settings.autonote_search_poll_s,
        )
        await sync.start()
        backend = LocalBackend(index, catch_up=sync.catch_up)
    else:
        backend = AtlasBackend(
            db, vector_index=settings.atlas_vector_index, text_index=settings.atlas_text_index
        )
    log.info("search.backend", backend=backend_name)
    service = RetrievalService(
        backend, embedder, NotesSearchQueries(db), chunking_enabled=settings.chunking_enabled
    )
    return service, sync


def build_lifespan(settings: Settings):
    """The lifespan owning every client; the order of shutdown is the reverse of start-up."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            client, embedded = await stack.enter_async_context(open_database(settings))
            db = client[settings.mongodb_db]
            await ensure_indexes(db, cache_ttl_days=settings.autonote_embedding_cache_days)

            openai_client = build_openai_client(settings)
            if openai_client is not None:
                stack.push_async_callback(openai_client.close)
            embedder = build_embedder(settings, openai_client)
            stack.push_async_callback(embedder.aclose)
            chunker = build_chunker(settings, embedder)

            users = UsersService(
                UsersRepository(db),
                admin_token=(
                    settings.autonote_admin_token.get_secret_value()
                    if settings.autonote_admin_token
                    else None
                ),
                rate_per_minute=settings.autonote_rate_limit_per_minute,
                admin_guesses_per_minute=settings.autonote_admin_guesses_per_minute,
            )
            search, sync = await build_search(settings, db, embedder)
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
            )

            async def on_change(note_id: ObjectId) -> bool:
                if settings.chunking_async:
                    indexing.workers.wake()
                    return False
                await indexing.workers.index_now(note_id, settings.autonote_sync_index_timeout_s)
                return True

            notes = NotesService(
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
            app.state.container = Container(
                settings=settings,
                client=client,
                db=db,
                users=users,
                notes=notes,
                embedded=embedded,
                indexing=indexing,
                search=search,
                chat=ChatService(
                    search,
                    build_chat_model(settings, openai_client),
                    tiktoken_tokenizer("cl100k_base").count,
                    context_tokens=settings.chat_context_tokens,
                ),
                embedder=embedder,
                chunker=chunker,
                imports=ImportService(
                    notes,
                    max_file_bytes=settings.autonote_max_import_file_bytes,
                    sandbox=ConversionSandbox(
                        timeout_s=settings.autonote_import_timeout_s,
                        memory_mb=settings.autonote_import_memory_mb,
                    ),
                ),
            )
            if settings.chunking_enabled:
                await indexing.workers.start()
                stack.push_async_callback(indexing.workers.stop)
            if settings.autonote_create_default_user:
                key = await users.ensure_default_user(settings.autonote_data_dir)
                if key:
                    _banner(key, str(settings.autonote_data_dir / "api_key"), settings.base_url)
            log.info(
                "app.started",
                database=settings.mongodb_db,
                embedded=embedded is not None,
                embedding_model=embedder.model,
                chunking_version=chunker.version,
            )
            yield
            log.info("app.stopping")

    return lifespan


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the application (settings from the environment unless given)."""
    settings = settings or load_settings()
    configure_logging(settings.log_level, settings.log_json)
    setup_telemetry()
    app = FastAPI(
        title="Autonote",
        version="0.1.0",
        summary="Markdown notes with heading-aware chunks, hybrid search and cited chat.",
        lifespan=build_lifespan(settings),
    )
    install_error_handlers(app)
    app.add_middleware(AuthenticateFirstMiddleware)
    app.add_middleware(
        BodyLimitMiddleware,
        default_limit=settings.autonote_max_request_bytes,
        limits={
            "/v1/notes/import": settings.autonote_max_import_bytes,
            # No valid search or chat needs the general limit (see the constants).
            "/v1/search": min(settings.autonote_max_request_bytes, SEARCH_MAX_BODY_BYTES),
            "/v1/chat": min(settings.autonote_max_request_bytes, CHAT_MAX_BODY_BYTES),
        },
    )
    app.add_middleware(RequestContextMiddleware)
    app.include_router(notes_router)
    app.include_router(users_router)
    app.include_router(search_router)
    app.include_router(chat_router)

    @app.get(
        "/metrics",
        tags=["ops"],
        response_class=PlainTextResponse,
        responses={
            401: {
                "model": ErrorBody,
                "description": "AUTONOTE_METRICS_TOKEN is set and not given",
            }
        },
    )
    async def metrics(request: Request) -> PlainTextResponse:
        """Prometheus text format: request latency by route, indexing lag and duration,
        queue depth, chunks created/embedded/reused, embedding tokens, chunk search
        duration — OpenTelemetry instruments exported through the Prometheus reader.
        Protected by `Authorization: Bearer <AUTONOTE_METRICS_TOKEN>` when that is set."""
        token = settings.autonote_metrics_token
        if token is not None:
            scheme, _, given = request.headers.get("authorization", "").partition(" ")
            wanted = token.get_secret_value().encode()
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                given.strip().encode(), wanted
            ):
                raise Unauthorized(
                    "missing or wrong metrics token (Bearer <AUTONOTE_METRICS_TOKEN>)"
                )
        from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

        return PlainTextResponse(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    # Probes answer HEAD as well as GET (load balancers use either) and ignore query
    # strings (cache-busters).
    @app.head("/healthz", include_in_schema=False)
    @app.get("/healthz", tags=["ops"])
    async def healthz() -> dict[str, str]:
        """Liveness: the process is up."""
        return {"status": "ok"}

    @app.head("/readyz", include_in_schema=False)
    @app.get(
        "/readyz",
        tags=["ops"],
        responses={503: {"model": ErrorBody, "description": "Database unreachable"}},
    )
    async def readyz(container: ContainerDep) -> JSONResponse:
        """Readiness: the database answers a ping within its timeout; otherwise 503
        `database_unavailable` with Retry-After, as every route answers in an outage."""
        try:
            # Bounded by the configured timeout: a stalled (not dead) server kept the
            # first probe waiting on the socket timeout, 7-10 s (found by review).
            with pymongo.timeout(container.settings.mongodb_timeout_ms / 1000):
                await container.db.command("ping")
        except Exception as exc:  # any failure means "not ready", never a 500
            log.warning("readyz.unavailable", error=type(exc).__name__)
            raise DatabaseUnavailable("the database did not answer a ping") from None
        return JSONResponse({"status": "ready", "database": "ok"})

    _document_configured_limits(app, settings)
    return app


NOTE_BODIES = ("NoteCreate", "NotePatch")


def _document_configured_limits(app: FastAPI, settings: Settings) -> None:
    """The OpenAPI document states the limits this deployment enforces (tag count and
    length are settings), so clients and schema-driven tests see the real contract."""
    base = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            # A copy: `openapi_extra` bodies (the import form) are module-level dicts shared
            # by every app built in this process, each with its own limits.
            schema = copy.deepcopy(base())
            arrays = [schema["components"]["schemas"][n]["properties"]["tags"] for n in NOTE_BODIES]
            form = schema["paths"]["/v1/notes/import"]["post"]["requestBody"]["content"]
            arrays.append(form["multipart/form-data"]["schema"]["properties"]["tags"])
            for tags in arrays:
                for array in [tags, *tags.get("anyOf", [])]:
                    if array.get("type") == "array":
                        array["maxItems"] = settings.autonote_max_tags
                        array["items"]["maxLength"] = settings.autonote_max_tag_length
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
