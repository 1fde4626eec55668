"""Builds the external clients and models from settings. Called from the lifespan (and from
CLI commands), never at import time: no module-level clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from api.config import Settings, load_settings

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from api.chunking import Chunker
    from connectors.chat import ChatModel
    from connectors.embeddings.base import Embedder

DEFAULT_OPENAI_EMBEDDING = ("text-embedding-3-small", 1536)

# USD per 1M input tokens (OpenAI list prices). Unknown models have no estimate.
PRICE_PER_MILLION_TOKENS: dict[str, float] = {
    "text-embedding-3-small": 0.02,
    "text-embedding-3-large": 0.13,
    "text-embedding-ada-002": 0.10,
}
# Embedding throughput assumed before a re-embed has measured its own (tokens per second):
# the local model on 2 cores (docs/indexing.md), OpenAI with four concurrent requests.
NOMINAL_TOKENS_PER_S = {"local": 3_000.0, "openai": 20_000.0}


def price_per_million(provider: str, model: str) -> float | None:
    """Price of 1M embedding tokens for `model`; 0 for a local model, None if unknown."""
    if provider == "local":
        return 0.0
    return PRICE_PER_MILLION_TOKENS.get(model)


def cost_usd(tokens: int, price: float | None) -> float | None:
    """Cost of embedding `tokens` at `price` per 1M tokens (None when the price is unknown)."""
    return None if price is None else tokens * price / 1_000_000


def build_openai_client(settings: Settings) -> AsyncOpenAI | None:
    """An `AsyncOpenAI` when a key or a base URL is configured (retries are ours)."""
    if settings.openai_api_key is None and not settings.openai_base_url:
        return None
    from openai import AsyncOpenAI

    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else "unused"
    return AsyncOpenAI(
        api_key=key,
        base_url=settings.openai_base_url,
        timeout=settings.openai_timeout_s,
        max_retries=0,
    )


def build_embedder(settings: Settings, openai_client: AsyncOpenAI | None) -> Embedder:
    """OpenAI when configured (EMBEDDING_PROVIDER=auto + OPENAI_API_KEY), else local ONNX."""
    if settings.resolved_embedding_provider == "openai":
        from connectors.embeddings.openai import OpenAIEmbedder

        if openai_client is None:
            raise ValueError("EMBEDDING_PROVIDER=openai needs OPENAI_API_KEY")
        model = settings.embedding_model or DEFAULT_OPENAI_EMBEDDING[0]
        dims = settings.embedding_dimensions or DEFAULT_OPENAI_EMBEDDING[1]
        return OpenAIEmbedder(
            openai_client,
            model,
            dims,
            max_attempts=settings.openai_max_retries,
            timeout_s=settings.openai_timeout_s,
        )
    from connectors.embeddings.local import LocalEmbedder

    if settings.embedding_model and settings.embedding_model != LocalEmbedder.model:
        raise ValueError(
            f"EMBEDDING_MODEL={settings.embedding_model!r} is not available locally; the local "
            f"provider serves {LocalEmbedder.model!r}"
        )
    return LocalEmbedder(batch_size=settings.embedding_batch_size)


class QueryEmbedders:
    """Embedders of the models of older index generations, for the queries of users whose
    search still reads one while their notes are re-indexed with the configured model:
    the local model can always be built; an OpenAI model only while an OpenAI client (a
    key) is configured. Built once per model key, closed with `aclose`."""

    def __init__(self, settings: Settings, openai_client: AsyncOpenAI | None) -> None:
        self.settings = settings
        self.openai_client = openai_client
        self._built: dict[str, Embedder | None] = {}

    def __call__(self, model_key: str) -> Embedder | None:
        if model_key not in self._built:
            self._built[model_key] = self._build(model_key)
        return self._built[model_key]

    def _build(self, model_key: str) -> Embedder | None:
        from connectors.embeddings.local import LocalEmbedder

        name = model_key.rpartition("@")[0]
        dimensions = model_dimensions(model_key)
        if name == LocalEmbedder.model and dimensions == LocalEmbedder.dimensions:
            return LocalEmbedder(batch_size=self.settings.embedding_batch_size)
        if self.openai_client is None or self.settings.openai_api_key is None or not dimensions:
            return None
        from connectors.embeddings.openai import OpenAIEmbedder

        return OpenAIEmbedder(
            self.openai_client,
            name,
            dimensions,
            max_attempts=self.settings.openai_max_retries,
            timeout_s=self.settings.openai_timeout_s,
        )

    async def aclose(self) -> None:
        for embedder in self._built.values():
            if embedder is not None:
                await embedder.aclose()
        self._built.clear()


@asynccontextmanager
async def environment_embedder(openai_api_key: str | None = None) -> AsyncIterator[Embedder]:
    """The embedder the environment configures, built as the app builds it, for one-off
    use outside the app (`MarkdownChunker.generate_embeddings`); with `openai_api_key`,
    OpenAI's with that key. It and its client are closed on exit. Raises `SettingsError`
    on invalid configuration."""
    overrides: dict[str, object] = {}
    if openai_api_key is not None:
        overrides = {"openai_api_key": openai_api_key, "embedding_provider": "openai"}
    settings = load_settings(**overrides)
    client = build_openai_client(settings)
    try:
        embedder = build_embedder(settings, client)
        try:
            yield embedder
        finally:
            await embedder.aclose()
    finally:
        if client is not None:
            await client.close()


def build_chat_client(settings: Settings, openai_client: AsyncOpenAI | None) -> AsyncOpenAI | None:
    """The client chat talks to: `openai_client` (the embeddings' one) unless CHAT_BASE_URL
    or CHAT_API_KEY is set; then a client of its own, each unset value falling back to
    OPENAI_BASE_URL / OPENAI_API_KEY. The caller closes a client it did not pass in."""
    if settings.chat_base_url is None and settings.chat_api_key is None:
        return openai_client
    from openai import AsyncOpenAI

    key = settings.chat_api_key or settings.openai_api_key
    return AsyncOpenAI(
        api_key=key.get_secret_value() if key else "unused",
        base_url=settings.chat_base_url or settings.openai_base_url,
        timeout=settings.openai_timeout_s,
        max_retries=0,
    )


def build_chat_model(settings: Settings, chat_client: AsyncOpenAI | None) -> ChatModel | None:
    """The configured chat model on `chat_client` (`build_chat_client`), or None (then chat
    answers extractively)."""
    if not settings.chat_model or chat_client is None:
        return None
    from connectors.openai_chat import OpenAIChatModel

    return OpenAIChatModel(chat_client, settings.chat_model, timeout_s=settings.openai_timeout_s)


def embedding_model_key(embedder: Embedder) -> str:
    """What chunks record as `embedding_model`: vectors are comparable only when equal."""
    return f"{embedder.model}@{embedder.dimensions}"


def model_dimensions(model_key: str | None) -> int | None:
    """The dimensions encoded in a model key ("name@384" -> 384), None if absent."""
    if not model_key or "@" not in model_key:
        return None
    tail = model_key.rsplit("@", 1)[1]
    return int(tail) if tail.isdigit() else None


def build_chunker(settings: Settings, embedder: Embedder) -> Chunker:
    """The configured strategy, sized in the embedder's own tokens so nothing is truncated."""
    from api.chunking import get_chunker

    return get_chunker(
        settings.chunking_strategy,
        max_chunk_tokens=settings.chunk_max_tokens,
        min_chunk_tokens=settings.chunking_min_tokens,
        target_chunk_tokens=settings.chunking_target_tokens,
        cohesive_cuts=settings.chunking_cohesive_cuts,
        tokenizer=embedder.tokenizer,
        max_input_tokens=embedder.max_input_tokens,
    )
