"""All configuration, from the environment (and `.env`), validated once at start-up.

Names follow the original design (`MONGODB_URL`, `CHUNKING_*`, `OPENAI_API_KEY`, ...) so
existing deployments keep working (docs/configuration.md). An invalid value fails fast with
a message naming the variable (see `load_settings`).
"""

from __future__ import annotations

import ipaddress
import warnings
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ChunkingStrategy = Literal["hierarchical_markdown", "fixed_tokens", "whole_note"]
# CHUNKING_MAX_TOKENS when unset: the chunker classes' own defaults (a test keeps them equal);
# fixed_tokens is the legacy 512-token window (docs/chunking.md).
DEFAULT_MAX_TOKENS: dict[str, int] = {
    "hierarchical_markdown": 300,
    "fixed_tokens": 512,
    "whole_note": 300,
}
# What the local provider serves (connectors.embeddings.local; a test keeps them equal),
# checked here so a conflicting EMBEDDING_MODEL/DIMENSIONS fails at start-up.
LOCAL_EMBEDDING_MODEL = "all-MiniLM-L6-v2-onnx-int8"
LOCAL_EMBEDDING_DIMENSIONS = 384


class Settings(BaseSettings):
    """Process configuration. Field names map to upper-case environment variables."""

    # An empty variable (`OPENAI_API_KEY=` as a `.env` template leaves it) is unset.
    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
        env_ignore_empty=True,
    )

    # Database. Unset MONGODB_URL → the embedded SecantusDB server in AUTONOTE_DATA_DIR.
    mongodb_url: str | None = None
    mongodb_db: str = Field("autonote", min_length=1, max_length=63, pattern=r"^[A-Za-z0-9_-]+$")
    mongodb_timeout_ms: int = Field(3000, ge=100, le=60_000)

    # Chunking (the original design's names).
    chunking_enabled: bool = True
    chunking_strategy: ChunkingStrategy = "hierarchical_markdown"
    # Unset: the strategy's default (see `chunk_max_tokens`).
    chunking_max_tokens: int | None = Field(None, ge=16, le=8191)
    chunking_min_tokens: int = Field(50, ge=0, le=4096)
    # Size split sections aim at (None: 2/3 of CHUNKING_MAX_TOKENS); see the chunker.
    chunking_target_tokens: int | None = Field(None, ge=1, le=8191)
    # Cuts of a split section go where the text changes topic (False: nearest boundary).
    chunking_cohesive_cuts: bool = True
    chunking_async: bool = True

    # Embeddings and chat.
    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    openai_timeout_s: float = Field(30.0, gt=0, le=600)
    openai_max_retries: int = Field(5, ge=1, le=20)
    embedding_provider: Literal["auto", "openai", "local"] = "auto"
    embedding_model: str | None = None
    embedding_dimensions: int | None = Field(None, ge=1, le=8192)
    embedding_batch_size: int = Field(32, ge=1, le=2048)
    chat_model: str | None = None
    # Chat may use another OpenAI-compatible server (a local Ollama or llama.cpp) than
    # embeddings: each unset one falls back to OPENAI_BASE_URL / OPENAI_API_KEY.
    chat_base_url: str | None = None
    chat_api_key: SecretStr | None = None
    chat_context_tokens: int = Field(3000, ge=200, le=200_000)
    # When no section's estimated relevance reaches this, chat cites nothing and says
    # nothing in the notes matches (docs/chat.md).
    chat_min_relevance: float = Field(0.35, ge=0.0, le=1.0)

    # Search.
    search_backend: Literal["auto", "atlas", "local"] = "auto"
    atlas_vector_index: str = "note_chunks_vector_index"
    atlas_text_index: str = "note_chunks_text_index"
    # On Atlas, how long a re-indexed note's previous chunks stay searchable (mongot
    # indexes writes asynchronously): the note is found while its new chunks are indexed.
    atlas_index_lag_s: float = Field(60.0, ge=0, le=3600)
    # How often the local search index reads commits made by other processes (this
    # process's own commits are applied at once: see LocalIndexSync.catch_up).
    autonote_search_poll_s: float = Field(0.5, gt=0, le=3600)
    # A new chunker or embedding model is built beside the index that serves search, which
    # keeps answering each user until their new one is complete (the local backend). False:
    # notes are re-indexed in place; with a new model each leaves search until re-embedded.
    autonote_blue_green: bool = True

    # Server, auth, limits.
    autonote_admin_token: SecretStr | None = None
    autonote_data_dir: Path = Path(".autonote")
    autonote_host: str = Field("127.0.0.1", min_length=1, pattern=r"^\S+$")
    autonote_port: int = Field(8000, ge=1, le=65535)
    # Browser origins that may call the API (CORS): comma-separated `scheme://host[:port]`,
    # or "*" alone. Empty: no CORS headers, so no other site's page can read a response.
    autonote_cors_origins: str = ""
    autonote_max_note_bytes: int = Field(2_000_000, ge=1_000, le=64_000_000)
    autonote_max_request_bytes: int = Field(8_000_000, ge=10_000, le=512_000_000)
    autonote_max_import_bytes: int = Field(50_000_000, ge=10_000, le=2_000_000_000)
    autonote_max_import_file_bytes: int = Field(10_000_000, ge=1_000, le=500_000_000)
    autonote_max_import_files: int = Field(200, ge=1, le=10_000)
    # Budget for converting one HTML/DOCX/PDF file (api.importing.sandbox).
    autonote_import_timeout_s: float = Field(60.0, gt=0, le=3600)
    autonote_import_memory_mb: int = Field(2048, ge=256, le=262_144)
    autonote_max_tags: int = Field(50, ge=0, le=1000)
    autonote_max_tag_length: int = Field(64, ge=1, le=512)
    autonote_rate_limit_per_minute: int = Field(1200, ge=0)  # 0 disables
    # Wrong admin tokens a client may send per minute (always limited: the admin token is
    # typed by an operator and may be guessable).
    autonote_admin_guesses_per_minute: int = Field(30, ge=1, le=1_000_000)
    autonote_create_default_user: bool = True
    autonote_metrics_token: SecretStr | None = None
    # Proxies whose X-Forwarded-For / X-Forwarded-Proto `serve` believes: comma-separated
    # addresses or networks, or "*". Empty: none (uvicorn's default trusted 127.0.0.1, so
    # any local process could pick the client address the admin-token throttle counts).
    autonote_trusted_proxies: str = ""
    # `/mcp` offers create_note and append_to_note (docs/mcp.md); off: read-only tools.
    autonote_mcp_allow_writes: bool = False

    # Indexing (the reconciler).
    autonote_index_workers: int = Field(2, ge=0, le=64)  # in-process workers when async
    autonote_index_max_attempts: int = Field(5, ge=1, le=100)
    autonote_index_lease_s: float = Field(120.0, gt=0, le=3600)
    autonote_index_backoff_base_s: float = Field(2.0, gt=0, le=3600)
    autonote_index_backoff_max_s: float = Field(600.0, gt=0, le=86_400)
    autonote_index_poll_s: float = Field(0.5, gt=0, le=60)
    # A run embedding longer than this hands its worker to another user's due note.
    autonote_index_turn_s: float = Field(10.0, gt=0, le=3600)
    # On shutdown, notes being indexed get this long to finish (commit and evict) before
    # their loops are cancelled; a cancelled note is retried when its lease expires.
    autonote_index_stop_grace_s: float = Field(10.0, ge=0, le=600)
    autonote_embedding_cache_days: int = Field(30, ge=1, le=3650)
    autonote_sync_index_timeout_s: float = Field(60.0, gt=0, le=3600)

    # Logging.
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_json: bool | None = None  # None → JSON when stderr is not a TTY

    @property
    def chunk_max_tokens(self) -> int:
        """CHUNKING_MAX_TOKENS, or when unset the strategy's default: 512 for the legacy
        `fixed_tokens` windows, 300 otherwise."""
        if self.chunking_max_tokens is not None:
            return self.chunking_max_tokens
        return DEFAULT_MAX_TOKENS[self.chunking_strategy]

    @field_validator(
        "mongodb_url",
        "openai_api_key",
        "openai_base_url",
        "embedding_model",
        "chat_model",
        "chat_base_url",
        "chat_api_key",
        "autonote_admin_token",
        "autonote_metrics_token",
        mode="before",
    )
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        """A value of only spaces is unset too, not a key or a URL (empty ones already are:
        `env_ignore_empty`)."""
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("autonote_data_dir", mode="before")
    @classmethod
    def _data_dir_not_blank(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError(
                "must not be empty (it would put the database in the current directory)"
            )
        return value

    @field_validator("openai_base_url", "chat_base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(
                    f"must be an http(s) URL such as https://api.openai.com/v1, not {value!r}"
                )
        return value

    @field_validator("autonote_trusted_proxies")
    @classmethod
    def _proxies(cls, value: str) -> str:
        # Checked as uvicorn reads them: it ignores a network with host bits set
        # (10.0.0.5/8) and honours "*" only alone, silently trusting nobody otherwise.
        entries = [e.strip() for e in value.split(",") if e.strip()]
        if "*" in entries and len(entries) > 1:
            raise ValueError("* (trust every proxy) must be the only entry")
        for entry in entries:
            if entry != "*":
                try:
                    ipaddress.ip_network(entry)
                except ValueError as exc:
                    raise ValueError(
                        f"{entry!r} is not an IP address or network such as 10.0.0.0/8 ({exc})"
                    ) from None
        return ",".join(entries)

    @field_validator("autonote_cors_origins")
    @classmethod
    def _origins(cls, value: str) -> str:
        # Browsers send an origin as scheme://host[:port], never with a path or a slash.
        entries = [e.strip() for e in value.split(",") if e.strip()]
        if "*" in entries and len(entries) > 1:
            raise ValueError("* (any origin) must be the only entry")
        for entry in entries:
            parts = urlsplit(entry)
            if entry != "*" and (
                parts.scheme not in ("http", "https")
                or not parts.hostname
                or entry != f"{parts.scheme}://{parts.netloc}"
            ):
                raise ValueError(
                    f"{entry!r} is not an origin such as https://notes.example.com "
                    "(scheme, host and optional port; no path)"
                )
        return ",".join(entries)

    @field_validator("mongodb_url")
    @classmethod
    def _connection_string(cls, value: str | None) -> str | None:
        if value is not None:
            check_mongodb_url(value)
        return value

    @model_validator(mode="after")
    def _check_combinations(self) -> Settings:
        max_tokens = self.chunk_max_tokens
        # fixed_tokens has no minimum (its windows are all full but the last).
        if self.chunking_strategy != "fixed_tokens" and self.chunking_min_tokens >= max_tokens:
            raise ValueError(
                "CHUNKING_MIN_TOKENS must be smaller than CHUNKING_MAX_TOKENS "
                f"({self.chunking_min_tokens} >= {max_tokens})"
            )
        target = self.chunking_target_tokens
        if target is not None and target > max_tokens:
            raise ValueError(
                "CHUNKING_TARGET_TOKENS must not exceed CHUNKING_MAX_TOKENS "
                f"({target} > {max_tokens})"
            )
        if (
            self.embedding_provider == "openai"
            and self.openai_api_key is None
            and not self.openai_base_url
        ):
            raise ValueError(
                "EMBEDDING_PROVIDER=openai needs OPENAI_API_KEY (or OPENAI_BASE_URL for a "
                "local server)"
            )
        if self.chat_model and not self.chat_server_configured:
            raise ValueError(
                "CHAT_MODEL needs CHAT_BASE_URL or OPENAI_BASE_URL (a local server), or "
                "CHAT_API_KEY or OPENAI_API_KEY (OpenAI)"
            )
        if self.autonote_index_backoff_base_s > self.autonote_index_backoff_max_s:
            raise ValueError(
                "AUTONOTE_INDEX_BACKOFF_BASE_S must not exceed AUTONOTE_INDEX_BACKOFF_MAX_S "
                f"({self.autonote_index_backoff_base_s} > {self.autonote_index_backoff_max_s})"
            )
        if self.resolved_embedding_provider == "local":
            if self.embedding_model not in (None, LOCAL_EMBEDDING_MODEL):
                raise ValueError(
                    f"EMBEDDING_MODEL={self.embedding_model!r} is not available locally; the "
                    f"local provider serves {LOCAL_EMBEDDING_MODEL!r} (set OPENAI_API_KEY "
                    "for OpenAI models)"
                )
            if self.embedding_dimensions not in (None, LOCAL_EMBEDDING_DIMENSIONS):
                raise ValueError(
                    f"EMBEDDING_DIMENSIONS={self.embedding_dimensions}: the local model has "
                    f"{LOCAL_EMBEDDING_DIMENSIONS} dimensions"
                )
        return self

    @property
    def base_url(self) -> str:
        """Where `serve` listens, as clients on this machine reach it."""
        host = self.autonote_host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        elif ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.autonote_port}"

    @property
    def resolved_embedding_provider(self) -> Literal["openai", "local"]:
        """`auto` means OpenAI when a key is configured, else the local ONNX model."""
        if self.embedding_provider == "auto":
            return "openai" if self.openai_api_key is not None else "local"
        return self.embedding_provider

    @property
    def chat_server_configured(self) -> bool:
        """A chat client can be built: some key or base URL applies to chat."""
        return any(
            v is not None
            for v in (
                self.chat_base_url,
                self.chat_api_key,
                self.openai_base_url,
                self.openai_api_key,
            )
        )

    @property
    def cors_origins(self) -> list[str]:
        """AUTONOTE_CORS_ORIGINS as a list (empty: CORS off)."""
        return [e for e in self.autonote_cors_origins.split(",") if e]

    @property
    def embedded_database(self) -> bool:
        return self.mongodb_url is None


class SettingsError(Exception):
    """Invalid configuration; the message names each offending environment variable."""


def check_mongodb_url(url: str) -> None:
    """ValueError unless `url` is a MongoDB connection string the driver can use, checked
    without connecting (and, for mongodb+srv://, without the DNS lookup)."""
    from pymongo.errors import PyMongoError
    from pymongo.uri_parser import parse_uri

    if url.startswith("mongodb+srv://"):
        rest = url.removeprefix("mongodb+srv://")
        host = rest.split("/", 1)[0].split("?", 1)[0].rpartition("@")[2]
        if not host or ":" in host or "," in host:
            raise ValueError("MONGODB_URL: mongodb+srv:// needs exactly one host name, no port")
        return
    if not url.startswith("mongodb://"):
        raise ValueError("MONGODB_URL must start with mongodb:// or mongodb+srv://")
    try:
        # Options it does not know only warn, as the client does (which warns once later).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parse_uri(url, warn=True)
    except (PyMongoError, ValueError) as exc:
        raise ValueError(f"MONGODB_URL is not a valid connection string: {exc}") from None


def load_settings(**overrides: object) -> Settings:
    """Build `Settings`, turning pydantic's errors into one message per variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = "".join(str(p) for p in err["loc"][:1]).upper() or "settings"
            lines.append(f"{loc}: {err['msg']}")
        raise SettingsError("invalid configuration: " + "; ".join(lines)) from None
