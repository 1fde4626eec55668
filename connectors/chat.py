"""Chat-model interface (implemented for OpenAI-compatible APIs in connectors.openai_chat)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal, Protocol, TypedDict


class ChatMessage(TypedDict):
    role: Literal["system", "user", "assistant"]
    content: str


class ChatError(Exception):
    """The chat model failed after bounded retries (or timed out)."""


class ChatModel(Protocol):
    model: str

    async def complete(self, messages: list[ChatMessage]) -> str:
        """The full answer to `messages`."""
        ...

    def stream(self, messages: list[ChatMessage]) -> AsyncIterator[str]:
        """The answer as text deltas, as the model produces them."""
        ...

    async def aclose(self) -> None: ...
