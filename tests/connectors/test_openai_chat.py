"""OpenAIChatModel with the real `openai` client against the local stub server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from openai import AsyncOpenAI

from connectors.chat import ChatError, ChatMessage
from connectors.openai_chat import OpenAIChatModel
from tests.stubs.fixtures import StubServer

CHAT = "/v1/chat/completions"
MESSAGES: list[ChatMessage] = [
    {"role": "system", "content": "Answer from the numbered sections only."},
    {"role": "user", "content": "[1] Setup > Install\npip install autonote\n\nHow to install?"},
]
REPLY = "Install it with `pip install autonote` [1].\n\nThen run `make run`."


def model(client: AsyncOpenAI, **kw: Any) -> OpenAIChatModel:
    return OpenAIChatModel(client, "gpt-stub", **kw)


async def test_complete_sends_prompt_and_returns_reply(
    openai_stub: StubServer, openai_stub_client: AsyncOpenAI
) -> None:
    openai_stub.set_chat_reply(REPLY)
    answer = await model(openai_stub_client, temperature=0.0, max_tokens=64).complete(MESSAGES)
    assert answer == REPLY
    (call,) = openai_stub.requests_to(CHAT)
    assert call.body["model"] == "gpt-stub" and not call.body.get("stream")
    assert call.body["messages"] == MESSAGES
    assert (call.body["temperature"], call.body["max_tokens"]) == (0.0, 64)


async def test_default_reply_is_deterministic(openai_stub_client: AsyncOpenAI) -> None:
    chat = model(openai_stub_client)
    first, second = await chat.complete(MESSAGES), await chat.complete(MESSAGES)
    assert first == second and "How to install?" in first


async def test_stream_deltas_join_to_the_reply(
    openai_stub: StubServer, openai_stub_client: AsyncOpenAI
) -> None:
    openai_stub.set_chat_reply(REPLY)
    deltas = [d async for d in model(openai_stub_client).stream(MESSAGES)]
    assert len(deltas) > 5  # really streamed, not one blob
    assert "".join(deltas) == REPLY
    (call,) = openai_stub.requests_to(CHAT)
    assert call.body["stream"] is True


async def test_a_refusal_is_the_answer_streamed_or_not(
    openai_stub: StubServer, openai_stub_client: AsyncOpenAI
) -> None:
    """A declining model sends `refusal` and no content; both paths return its words."""
    refusal = "I'm sorry, but I can't help with that request."
    openai_stub.set_chat_reply(refusal, refusal=True)
    chat = model(openai_stub_client)
    assert await chat.complete(MESSAGES) == refusal
    deltas = [d async for d in chat.stream(MESSAGES)]
    assert len(deltas) > 3 and "".join(deltas) == refusal


async def test_reply_can_depend_on_the_prompt(
    openai_stub: StubServer, openai_stub_client: AsyncOpenAI
) -> None:
    openai_stub.set_chat_reply(lambda body: f"{len(body['messages'])} messages")
    assert await model(openai_stub_client).complete(MESSAGES) == "2 messages"


async def test_transient_error_retried_by_sdk(
    openai_stub: StubServer, openai_stub_client: AsyncOpenAI
) -> None:
    openai_stub.set_chat_reply("ok")
    openai_stub.fail_next(429, 1, retry_after=0.05)
    assert await model(openai_stub_client, max_retries=2).complete(MESSAGES) == "ok"
    assert [c.status for c in openai_stub.requests_to(CHAT)] == [429, 200]


async def test_gives_up_with_chat_error(
    openai_stub: StubServer, openai_stub_client: AsyncOpenAI
) -> None:
    openai_stub.fail_next(500, 10, retry_after=0.05)
    with pytest.raises(ChatError, match="500"):
        await model(openai_stub_client, max_retries=2).complete(MESSAGES)
    assert len(openai_stub.requests_to(CHAT)) == 3


async def test_bad_request_not_retried(
    openai_stub: StubServer, openai_stub_client: AsyncOpenAI
) -> None:
    openai_stub.fail_next(400, 5)
    with pytest.raises(ChatError, match="400"):
        await model(openai_stub_client, max_retries=2).complete(MESSAGES)
    assert len(openai_stub.requests_to(CHAT)) == 1


async def test_stream_failure_is_chat_error(
    openai_stub: StubServer, openai_stub_client: AsyncOpenAI
) -> None:
    openai_stub.fail_next(503, 10, retry_after=0.05)
    with pytest.raises(ChatError, match="503"):
        async for _ in model(openai_stub_client, max_retries=1).stream(MESSAGES):
            pass
    assert len(openai_stub.requests_to(CHAT)) == 2


async def test_timeout_is_chat_error(
    openai_stub: StubServer, openai_stub_client: AsyncOpenAI
) -> None:
    openai_stub.set_delay(1.0)
    with pytest.raises(ChatError, match="APITimeoutError"):
        await model(openai_stub_client, timeout_s=0.2, max_retries=0).complete(MESSAGES)


@dataclass
class Trickle:
    """A client of the trickling server, and whether the server sent its `tail` (which
    comes only after 40 writes 0.3 s apart, 12 s of this event loop's clock)."""

    client: AsyncOpenAI
    finished: bool = False


@asynccontextmanager
async def trickling_server(head: bytes, filler: bytes, tail: bytes = b"") -> AsyncIterator[Trickle]:
    """A server that answers any request with `head`, then `filler` every 0.3 s for 12 s
    (bytes, so no read ever times out), then `tail`."""
    trickle: Trickle

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in request.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
        try:
            writer.write(head)
            for _ in range(40):
                writer.write(filler)
                await writer.drain()
                await asyncio.sleep(0.3)
            writer.write(tail)
            await writer.drain()
            trickle.finished = True
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    trickle = Trickle(AsyncOpenAI(api_key="sk-test", base_url=f"http://127.0.0.1:{port}/v1"))
    try:
        yield trickle
    finally:
        await trickle.client.close()
        server.close()


async def test_a_server_that_trickles_bytes_cannot_hold_an_answer_past_its_deadline() -> None:
    """`timeout_s` bounds each read; a server sending one byte of JSON whitespace every
    0.3 s never lets a read time out, and held the chat request for as long as it liked
    (12 s with a 2 s timeout). The whole answer now has a deadline: the request ends with
    the deadline's error while the server is still trickling (the deadline and the
    server's pauses run on the same event loop clock, so load cannot reorder them)."""
    body = json.dumps({"choices": []}).encode()
    async with trickling_server(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n",
        b"1\r\n \r\n",  # one chunk of leading whitespace (valid JSON, so far)
        f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n",
    ) as trickle:
        # Room for the SDK's longest Retry-After wait (60 s) per retry, so a healthy answer
        # after a 429 is never cut off (a first version allowed 2 s).
        assert model(trickle.client, timeout_s=1.0, max_retries=1).deadline_s == 63.0
        chat = model(trickle.client, timeout_s=1.0, max_retries=0)
        assert chat.deadline_s == 2.0
        with pytest.raises(ChatError, match=r"no answer within 2\.0 s"):
            await chat.complete(MESSAGES)
        assert not trickle.finished, "the answer waited for the server to finish"


async def test_a_stream_that_sends_nothing_ends_at_its_deadline() -> None:
    """A stream whose server keeps the connection busy with SSE comments but never sends
    an event ends with ChatError at the deadline, after the deltas it did send, while the
    server is still sending comments."""
    first = (
        b'data: {"id":"x","object":"chat.completion.chunk","created":0,"model":"m",'
        b'"choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}\n\n'
    )
    got: list[str] = []
    async with trickling_server(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n" + first,
        b": keep-alive\n\n",  # bytes, but no event
    ) as trickle:
        with pytest.raises(ChatError, match=r"sent nothing for 2\.0 s"):
            async for delta in model(trickle.client, timeout_s=1.0, max_retries=0).stream(MESSAGES):
                got.append(delta)
        assert got == ["Hello"]
        assert not trickle.finished, "the stream waited for the server to finish"


async def test_a_refusal_after_content_is_not_streamed_as_complete_would_not_return_it() -> None:
    """`complete` returns the content when a reply has both; the stream yielded the content
    and then the refusal, so the two paths disagreed."""

    def event(delta: dict[str, str]) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": None}
        payload = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m"}
        return b"data: " + json.dumps({**payload, "choices": [choice]}).encode() + b"\n\n"

    events = (
        event({"content": "Partial answer [1]. "})
        + event({"refusal": "I can't continue with that."})
        + b"data: [DONE]\n\n"
    )
    async with trickling_server(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n" + events, b"", b""
    ) as trickle:
        chat = model(trickle.client, timeout_s=5.0, max_retries=0)
        deltas = [d async for d in chat.stream(MESSAGES)]
    assert deltas == ["Partial answer [1]. "]
