"""The FastAPI application: `create_app()` wires routes, middleware, error handlers and a
lifespan that owns every client (`api.container`)."""

from __future__ import annotations

import copy
import hmac
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Annotated, Any

import pymongo
import structlog
from fastapi import Depends, FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, PlainTextResponse

from api.chat.routes import openai_router
from api.chat.routes import router as chat_router
from api.chat.schemas import CHAT_MAX_BODY_BYTES
from api.config import Settings, load_settings
from api.container import Container, build_container
from api.error_handlers import install_error_handlers
from api.errors import DatabaseUnavailable, StartupError, Unauthorized
from api.importing.routes import router as import_router
from api.indexing.switch import ReindexGate
from api.logging import configure_logging
from api.mcp.http import McpEndpoint
from api.middleware import (
    AuthenticateFirstMiddleware,
    BodyLimitMiddleware,
    RequestContextMiddleware,
    cors_options,
    single_query_values,
)
from api.notes.routes import router as notes_router
from api.observability import setup_telemetry
from api.retrieval.routes import router as search_router
from api.retrieval.schemas import SEARCH_MAX_BODY_BYTES
from api.schemas import ErrorBody
from api.users.routes import router as users_router
from api.web.docs import install_docs
from api.web.page import install_page

log = structlog.get_logger(__name__)


def get_container(request: Request) -> Container:
    return request.app.state.container


ContainerDep = Annotated[Container, Depends(get_container)]


def _banner(key: str, key_file: str, base_url: str) -> None:
    print(
        "\n" + "=" * 72 + "\nAutonote created a default user. Its API key (shown once, also saved"
        f" in {key_file}):\n\n    {key}\n\nTry:  curl -H 'Authorization: Bearer {key}' "
        f"{base_url}/v1/notes\n" + "=" * 72 + "\n",
        flush=True,
    )


def build_lifespan(settings: Settings, reindex_gate: ReindexGate | None = None):
    """The lifespan owning every client; shutdown runs in the reverse order of start-up."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            try:
                container = await build_container(settings, stack, reindex_gate=reindex_gate)
            except StartupError as exc:
                log.error("app.startup_failed", error=str(exc))
                raise
            app.state.container = container
            if settings.chunking_enabled:
                await container.indexing.workers.start()
                stack.push_async_callback(container.indexing.workers.stop)
            await stack.enter_async_context(app.state.mcp.running(container))
            if settings.autonote_create_default_user:
                key = await container.users.ensure_default_user(settings.autonote_data_dir)
                if key:
                    _banner(key, str(settings.autonote_data_dir / "api_key"), settings.base_url)
            log.info(
                "app.started",
                database=settings.mongodb_db,
                embedded=container.embedded is not None,
                embedding_model=container.embedder.model,
                chunking_version=container.chunker.version,
            )
            yield
            log.info("app.stopping")

    return lifespan


def create_app(
    settings: Settings | None = None, *, reindex_gate: ReindexGate | None = None
) -> FastAPI:
    """Build the application (settings from the environment unless given). `reindex_gate`:
    asked before start-up begins re-indexing into a changed chunker or model (`autonote
    serve` asks on a terminal); without one the start-up logs the cost and goes on."""
    settings = settings or load_settings()
    configure_logging(settings.log_level, settings.log_json)
    setup_telemetry()
    app = FastAPI(
        title="Autonote",
        version="0.1.0",
        summary="Markdown notes with heading-aware chunks, hybrid search and cited chat.",
        lifespan=build_lifespan(settings, reindex_gate),
        dependencies=[Depends(single_query_values)],
        docs_url=None,  # served from installed assets: install_docs
        redoc_url=None,
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
            "/v1/chat/completions": min(settings.autonote_max_request_bytes, CHAT_MAX_BODY_BYTES),
            "/v1/chat": min(settings.autonote_max_request_bytes, CHAT_MAX_BODY_BYTES),
        },
    )
    if settings.cors_origins:  # outside the body limit and authentication
        app.add_middleware(CORSMiddleware, **cors_options(settings.cors_origins))
    app.add_middleware(RequestContextMiddleware)
    app.include_router(import_router)
    app.include_router(notes_router)
    app.include_router(users_router)
    app.include_router(search_router)
    app.include_router(chat_router)
    app.include_router(openai_router)
    app.state.mcp = McpEndpoint(
        allow_writes=settings.autonote_mcp_allow_writes,
        max_body_bytes=settings.autonote_max_request_bytes,
    )
    app.add_route("/mcp", app.state.mcp, include_in_schema=False)

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
            # Bounded by the configured timeout: a stalled (not dead) server would keep
            # the probe waiting on the socket timeout (tests/test_probes.py).
            with pymongo.timeout(container.settings.mongodb_timeout_ms / 1000):
                await container.db.command("ping")
        except Exception as exc:  # any failure means "not ready", never a 500
            log.warning("readyz.unavailable", error=type(exc).__name__)
            raise DatabaseUnavailable("the database did not answer a ping") from None
        return JSONResponse({"status": "ready", "database": "ok"})

    install_docs(app)
    install_page(app)
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
