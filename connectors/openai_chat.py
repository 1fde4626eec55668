"""`ChatModel` over the chat-completions API of OpenAI or any OpenAI-compatible server.

Retries are the SDK's (`max_retries`, honouring `Retry-After`): unlike embeddings, nothing
here needs per-attempt accounting, and a stream can only be retried before its first byte,
which is exactly what the SDK does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import openai
import structlog
from openai import AsyncOpenAI

from connectors.chat import ChatError, ChatMessage

log = structlog.get_logger(__name__)


def _describe(exc: openai.APIError) -> str:
    status = getattr(exc, "status_code", None)
    kind = type(exc).__name__
    return f"{kind} (status {status})" if status is not None else kind


# The openai SDK waits at most this long before a retry (a longer Retry-After is ignored).
_MAX_RETRY_WAIT_S = 60.0


class OpenAIChatModel:
    """Chat completions through an injected `AsyncOpenAI` client (owned by the app)."""

    def __init__(
        self,
        client: AsyncOpenAI,
        model: str,
        *,
        temperature: float = 0.1,
        max_tokens: int = 1024,
        timeout_s: float = 60,
        max_retries: int = 2,
    ) -> None:
        """`timeout_s` bounds each HTTP read (for a stream: connect and each read);
        `max_retries` is the SDK's bounded retry of 408/409/429/5xx/connection errors. A
        whole (non-streamed) answer also has a deadline, and so has each event of a stream:
        every attempt's `timeout_s`, the longest wait the SDK makes before a retry (60 s:
        it honours a server's Retry-After up to that) and a second of slack (so a plain
        read timeout still ends it first), since a server that trickles bytes never lets
        a read time out."""
        self.model = model
        self._temperature = temperature
        self._max_tokens = max_tokens
        self._client = client.with_options(timeout=timeout_s, max_retries=max_retries)
        self.deadline_s = timeout_s * (max_retries + 1) + _MAX_RETRY_WAIT_S * max_retries + 1.0

    def _params(self, messages: list[ChatMessage]) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "temperature": self._temperature,
            # `max_tokens` rather than `max_completion_tokens`: every OpenAI-compatible
            # server (vLLM, Ollama, llama.cpp) understands it.
            "max_tokens": self._max_tokens,
        }

    async def complete(self, messages: list[ChatMessage]) -> str:
        """The whole answer; raises `ChatError` once the SDK's retries are exhausted."""
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.deadline_s):
                resp = await self._client.chat.completions.create(**self._params(messages))
        except openai.APIError as exc:
            log.error("chat.failed", model=self.model, error=_describe(exc), stream=False)
            raise ChatError(f"chat model {self.model} failed: {_describe(exc)}: {exc}") from exc
        except TimeoutError as exc:
            log.error("chat.failed", model=self.model, error="deadline", stream=False)
            raise ChatError(
                f"chat model {self.model} gave no answer within {self.deadline_s:.1f} s"
            ) from exc
        if not resp.choices:
            raise ChatError(f"chat model {self.model} returned no choices")
        choice = resp.choices[0]
        if choice.finish_reason == "length":
            log.warning("chat.truncated", model=self.model, max_tokens=self._max_tokens)
        usage = resp.usage
        log.info(
            "chat.completed",
            model=self.model,
            stream=False,
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
            duration_ms=round((time.perf_counter() - started) * 1000, 1),
        )
        if choice.message.refusal and not choice.message.content:
            log.info("chat.refused", model=self.model, stream=False)
        return choice.message.content or choice.message.refusal or ""

    async def stream(self, messages: list[ChatMessage]) -> AsyncIterator[str]:
        """Content deltas as the model produces them; `ChatError` on failure (before or
        during the stream)."""
        started = time.perf_counter()
        pieces = 0
        refused = said = False
        try:
            stream = await self._client.chat.completions.create(
                **self._params(messages), stream=True
            )
            async with stream:
                chunks = stream.__aiter__()
                while True:
                    # Each event within the deadline: a server that trickles keep-alive
                    # bytes but never an event would otherwise hold the stream forever.
                    # (The timeout covers the wait only, never the consumer's work at the
                    # `yield`, and runs in this task, where the stream was opened.)
                    async with asyncio.timeout(self.deadline_s):
                        chunk = await anext(chunks, None)
                    if chunk is None:
                        break
                    for choice in chunk.choices:
                        # A declining model streams `refusal` deltas and no content; they
                        # are its answer, as `message.refusal` is for `complete` (dropped,
                        # the stream fell back to quotes where the JSON answer refused).
                        # Like `complete`, content wins: no refusal after content.
                        text = choice.delta.content
                        if text:
                            said = True
                        elif choice.delta.refusal and not said:
                            text = choice.delta.refusal
                            if not refused:
                                refused = True
                                log.info("chat.refused", model=self.model, stream=True)
                        if text:
                            pieces += 1
                            yield text
                        if choice.finish_reason == "length":
                            log.warning(
                                "chat.truncated", model=self.model, max_tokens=self._max_tokens
                            )
        except openai.APIError as exc:
            log.error(
                "chat.failed", model=self.model, error=_describe(exc), stream=True, deltas=pieces
            )
            raise ChatError(f"chat model {self.model} failed: {_describe(exc)}: {exc}") from exc
        except TimeoutError as exc:
            log.error("chat.failed", model=self.model, error="deadline", stream=True, deltas=pieces)
            raise ChatError(
                f"chat model {self.model} sent nothing for {self.deadline_s:.1f} s"
            ) from exc
        log.info(
            "chat.completed",
            model=self.model,
            stream=True,
            deltas=pieces,
            duration_ms=round((time.perf_counter() - started) * 1000, 1),
        )

    async def aclose(self) -> None:
        """Nothing to release: the injected client belongs to the application."""
