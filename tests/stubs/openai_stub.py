"""A small OpenAI-compatible server for tests and benchmarks.

It speaks the wire format of `POST /v1/embeddings` and `POST /v1/chat/completions` (streaming
included) closely enough for the real `openai` client, and enforces the limits the real API
enforces (2048 inputs, 8192 tokens per input, 300 000 tokens per request, no empty strings,
`dimensions` only for text-embedding-3 models), so a connector that passes here respects them.

Vectors are deterministic: `stub_embedding(text, dims, model)` derives a unit vector from the
sha256 of the input, so tests can check that every returned vector belongs to its input.

Tests steer it through `StubState` (failures, delays, chat reply, request log); a standalone
process is steered over HTTP under `/_stub/...`. Run it with
`python -m tests.stubs.openai_stub --port 8765`; in-process, use
`tests.stubs.fixtures.StubServer` (a background thread) or the `openai_stub` fixture.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import re
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from api.tokenizer.encoders import tiktoken_tokenizer

MAX_INPUTS = 2048
MAX_INPUT_TOKENS = 8192
MAX_REQUEST_TOKENS = 300_000
NATIVE_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}

# A reply, a function of the request body giving one, or the exact pieces a streamed reply
# is sent in (joined when not streamed): every chunk boundary a test wants to see.
ChatReply = str | list[str] | Callable[[dict[str, Any]], str | list[str]]
# How a streamed chat answer breaks off: "error" sends an error event (as the API does when
# the model fails mid-answer), "drop" closes the connection without ending the response.
StreamBreak = tuple[int, Literal["error", "drop"]]


def stub_embedding(text: str | list[int], dimensions: int, model: str) -> np.ndarray:
    """The float32 unit vector the stub returns for `text`: same input, same vector.

    Like OpenAI's shortened embeddings, a `dimensions` below the model's native size is a
    re-normalised prefix of the full vector.
    """
    key = text if isinstance(text, str) else json.dumps(text)
    seed = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "little")
    native = max(NATIVE_DIMENSIONS.get(model, dimensions), dimensions)
    full = np.random.default_rng(seed).standard_normal(native, dtype=np.float32)
    vec = full[:dimensions]
    return (vec / np.linalg.norm(vec)).astype(np.float32)


def default_chat_reply(body: dict[str, Any]) -> str:
    """Deterministic reply when a test has not set one: echoes the last user message."""
    users = [m.get("content") for m in body.get("messages", []) if m.get("role") == "user"]
    last = users[-1] if users and isinstance(users[-1], str) else ""
    return f"Stub reply to: {last[:200]}"


@dataclass
class LoggedRequest:
    """One API request the stub received (control calls are not logged)."""

    path: str
    body: dict[str, Any]
    time: float  # time.time() when the request arrived
    status: int = 200  # what the stub answered (or is about to answer)
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class _Failure:
    status: int
    retry_after: float | None
    path: str | None


class StubState:
    """Mutable behaviour of the stub; safe to drive from the test thread while serving."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Forget requests, pending failures, delays and the chat reply."""
        with self._lock:
            self._requests: list[LoggedRequest] = []
            self._failures: deque[_Failure] = deque()
            self._delay = 0.0
            self._delay_count: int | None = None
            self._chat_reply: ChatReply | None = None
            self._refusal = False
            self._stream_break: StreamBreak | None = None

    @property
    def requests(self) -> list[LoggedRequest]:
        """A snapshot of the request log, oldest first."""
        with self._lock:
            return list(self._requests)

    def fail_next(
        self,
        status: int,
        count: int = 1,
        retry_after: float | None = None,
        path: str | None = None,
    ) -> None:
        """Answer the next `count` API requests (to `path` only, if given) with `status`,
        adding `Retry-After` and `retry-after-ms` headers when `retry_after` is set."""
        with self._lock:
            self._failures.extend(_Failure(status, retry_after, path) for _ in range(count))

    def set_delay(self, seconds: float, count: int | None = None) -> None:
        """Delay the next `count` API requests (all of them if None) by `seconds`."""
        with self._lock:
            self._delay = seconds
            self._delay_count = count

    def set_chat_reply(self, reply: ChatReply | None, *, refusal: bool = False) -> None:
        """Fixed reply text, the exact pieces to stream it in (a list), a function of the
        request body giving either, or None for the default. With `refusal`, the reply is
        sent as the model's refusal (`message.refusal`, or `refusal` deltas when streamed)
        with no content, as the API does when a model declines."""
        with self._lock:
            self._chat_reply = reply
            self._refusal = refusal

    def break_next_stream(self, after_pieces: int, how: Literal["error", "drop"]) -> None:
        """The next streamed chat answer breaks off after `after_pieces` content pieces."""
        with self._lock:
            self._stream_break = (after_pieces, how)

    def _take_stream_break(self) -> StreamBreak | None:
        with self._lock:
            taken, self._stream_break = self._stream_break, None
            return taken

    def _admit(
        self, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[LoggedRequest, _Failure | None, float]:
        with self._lock:
            entry = LoggedRequest(path=path, body=body, time=time.time(), headers=headers)
            self._requests.append(entry)
            failure = None
            for i, f in enumerate(self._failures):
                if f.path is None or f.path == path:
                    failure = f
                    del self._failures[i]
                    break
            delay = 0.0
            if self._delay > 0 and (self._delay_count is None or self._delay_count > 0):
                delay = self._delay
                if self._delay_count is not None:
                    self._delay_count -= 1
            if failure is not None:
                entry.status = failure.status
            return entry, failure, delay

    def _reply_for(self, body: dict[str, Any]) -> tuple[str | list[str], bool]:
        with self._lock:
            reply, refusal = self._chat_reply, self._refusal
        if reply is None:
            return default_chat_reply(body), refusal
        return (reply(body) if callable(reply) else reply), refusal


def _error(
    status: int, message: str, *, param: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    kind = _ERROR_TYPES.get(status, "server_error")
    body = {"error": {"message": message, "type": kind, "param": param, "code": kind}}
    return JSONResponse(body, status_code=status, headers=headers)


def _failure_response(failure: _Failure) -> JSONResponse:
    headers: dict[str, str] = {}
    if failure.retry_after is not None:
        seconds = failure.retry_after
        headers["retry-after"] = str(int(seconds)) if seconds == int(seconds) else str(seconds)
        headers["retry-after-ms"] = str(int(seconds * 1000))
    return _error(failure.status, f"stub: injected {failure.status}", headers=headers)


def _embeddings(body: dict[str, Any]) -> Response:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return _error(400, "you must provide a model parameter", param="model")
    raw = body.get("input")
    if isinstance(raw, str) or (isinstance(raw, list) and raw and isinstance(raw[0], int)):
        inputs: list[Any] = [raw]
    elif isinstance(raw, list) and raw:
        inputs = raw
    else:
        return _error(400, "'input' must be a non-empty string or array", param="input")
    if len(inputs) > MAX_INPUTS:
        return _error(400, f"'input' must have at most {MAX_INPUTS} items", param="input")
    dims = body.get("dimensions")
    if dims is not None and not model.startswith("text-embedding-3"):
        return _error(400, "This model does not support specifying dimensions.", param="dimensions")
    dims = int(dims) if dims is not None else NATIVE_DIMENSIONS.get(model, 1536)
    fmt = body.get("encoding_format") or "float"
    if fmt not in ("float", "base64"):
        return _error(400, "encoding_format must be 'float' or 'base64'", param="encoding_format")
    tok = tiktoken_tokenizer("cl100k_base")
    counts: list[int] = []
    for i, item in enumerate(inputs):
        if isinstance(item, str):
            if item == "":
                return _error(400, f"'$.input[{i}]' is invalid: empty string", param="input")
            counts.append(tok.count(item))
        elif isinstance(item, list) and all(isinstance(t, int) for t in item):
            counts.append(len(item))
        else:
            return _error(400, f"'$.input[{i}]' is invalid", param="input")
        if counts[-1] > MAX_INPUT_TOKENS:
            return _error(
                400,
                f"input {i} has {counts[-1]} tokens; the maximum is {MAX_INPUT_TOKENS}",
                param="input",
            )
    total = sum(counts)
    if total > MAX_REQUEST_TOKENS:
        return _error(
            400, f"requested {total} tokens, max {MAX_REQUEST_TOKENS} per request", param="input"
        )
    data = []
    for i, item in enumerate(inputs):
        vec = stub_embedding(item, dims, model)
        payload: Any = (
            base64.b64encode(vec.astype("<f4").tobytes()).decode("ascii")
            if fmt == "base64"
            else vec.tolist()
        )
        data.append({"object": "embedding", "index": i, "embedding": payload})
    return JSONResponse(
        {
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": total, "total_tokens": total},
        }
    )


def _chat(
    body: dict[str, Any],
    reply: str | list[str],
    seq: int,
    broken: StreamBreak | None = None,
    *,
    refusal: bool = False,
) -> Response:
    model = body.get("model")
    messages = body.get("messages")
    if not isinstance(model, str) or not isinstance(messages, list) or not messages:
        return _error(400, "'model' and a non-empty 'messages' array are required")
    pieces = reply if isinstance(reply, list) else re.findall(r"\s*\S+|\s+", reply)
    reply = "".join(pieces)
    tok = tiktoken_tokenizer("cl100k_base")
    prompt_tokens = sum(tok.count(str(m.get("content") or "")) for m in messages)
    completion_tokens = tok.count(reply)
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    ident, created = f"chatcmpl-stub-{seq}", int(time.time())
    if not body.get("stream"):
        return JSONResponse(
            {
                "id": ident,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "logprobs": None,
                        "message": {"role": "assistant", "content": reply}
                        if not refusal
                        else {"role": "assistant", "content": None, "refusal": reply},
                    }
                ],
                "usage": usage,
            }
        )
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

    def chunk(delta: dict[str, Any], finish: str | None, with_usage: bool = False) -> str:
        payload: dict[str, Any] = {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        if with_usage:
            payload["choices"], payload["usage"] = [], usage
        return f"data: {json.dumps(payload)}\n\n"

    async def events() -> AsyncIterator[str]:
        yield chunk({"role": "assistant", "content": ""}, None)
        for n, piece in enumerate(pieces):
            if broken is not None and n == broken[0]:
                if broken[1] == "drop":
                    raise ConnectionAbortedError("stub: stream dropped")
                error = {"message": "The server had an error", "type": "server_error"}
                yield f"data: {json.dumps({'error': error})}\n\n"
                return
            yield chunk({"refusal" if refusal else "content": piece}, None)
            await asyncio.sleep(0)  # let the server flush pieces separately
        yield chunk({}, "stop")
        if include_usage:
            yield chunk({}, None, with_usage=True)
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


def create_app(state: StubState) -> FastAPI:
    """The stub's ASGI app, driven by `state`."""
    app = FastAPI(title="openai-stub", docs_url=None, redoc_url=None, openapi_url=None)

    async def admit(
        request: Request,
    ) -> tuple[LoggedRequest, dict[str, Any] | None, Response | None]:
        try:
            body = await request.json()
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in request.headers.items()}
        entry, failure, delay = state._admit(
            request.url.path, body if isinstance(body, dict) else {}, headers
        )
        if delay:
            await asyncio.sleep(delay)
        if failure is not None:
            return entry, None, _failure_response(failure)
        if not headers.get("authorization", "").startswith("Bearer "):
            entry.status = 401
            return entry, None, _error(401, "You didn't provide an API key.")
        if not isinstance(body, dict):
            entry.status = 400
            return entry, None, _error(400, "We could not parse the JSON body of your request.")
        return entry, body, None

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> Response:
        entry, body, early = await admit(request)
        if early is not None or body is None:
            return early or _error(400, "no body")
        response = _embeddings(body)
        entry.status = response.status_code
        return response

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        entry, body, early = await admit(request)
        if early is not None or body is None:
            return early or _error(400, "no body")
        broken = state._take_stream_break() if body.get("stream") else None
        reply, refusal = state._reply_for(body)
        response = _chat(body, reply, len(state.requests), broken, refusal=refusal)
        entry.status = response.status_code
        return response

    @app.post("/_stub/fail")
    async def ctl_fail(request: Request) -> dict[str, bool]:
        b = await request.json()
        state.fail_next(
            int(b["status"]), int(b.get("count", 1)), b.get("retry_after"), b.get("path")
        )
        return {"ok": True}

    @app.post("/_stub/delay")
    async def ctl_delay(request: Request) -> dict[str, bool]:
        b = await request.json()
        state.set_delay(float(b["seconds"]), b.get("count"))
        return {"ok": True}

    @app.post("/_stub/chat_reply")
    async def ctl_reply(request: Request) -> dict[str, bool]:
        state.set_chat_reply((await request.json()).get("text"))
        return {"ok": True}

    @app.get("/_stub/requests")
    async def ctl_requests() -> list[dict[str, Any]]:
        return [asdict(r) for r in state.requests]

    @app.post("/_stub/reset")
    async def ctl_reset() -> dict[str, bool]:
        state.reset()
        return {"ok": True}

    return app


def main(argv: list[str] | None = None) -> None:
    """Serve the stub in the foreground (for benchmarks and manual runs)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args(argv)
    print(f"openai stub on http://{args.host}:{args.port}/v1", flush=True)
    uvicorn.run(
        create_app(StubState()),
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
