"""The stub itself enforces the real API's limits (so connector tests that pass mean
something) and can be driven over HTTP when run as a standalone process."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from tests.stubs.fixtures import StubServer
from tests.stubs.openai_stub import MAX_INPUTS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"input": ["x"] * (MAX_INPUTS + 1)}, "at most 2048"),
        ({"input": ["fine", ""]}, "empty string"),
        ({"input": "word " * 8200}, "maximum is 8192"),
        ({"input": ["x"], "model": "text-embedding-ada-002", "dimensions": 64}, "dimensions"),
    ],
)
async def test_embedding_limits_enforced(
    openai_stub_client: AsyncOpenAI, kwargs: dict[str, object], message: str
) -> None:
    kwargs.setdefault("model", "text-embedding-3-small")
    with pytest.raises(openai.BadRequestError, match=message):
        await openai_stub_client.embeddings.create(**kwargs)  # type: ignore[call-overload]


async def test_request_token_limit(openai_stub_client: AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="max 300000"):
        await openai_stub_client.embeddings.create(
            model="text-embedding-3-small", input=["word " * 8000] * 40
        )


async def test_missing_api_key_is_401(openai_stub: StubServer) -> None:
    async with httpx.AsyncClient() as http:
        resp = await http.post(
            f"{openai_stub.base_url}/embeddings", json={"model": "m", "input": "x"}
        )
    assert resp.status_code == 401 and resp.json()["error"]["message"]


async def test_same_text_same_vector_usage_is_real(openai_stub_client: AsyncOpenAI) -> None:
    resp = await openai_stub_client.embeddings.create(
        model="text-embedding-3-small", input=["hello world", "hello world", "other"]
    )
    a, b, c = (d.embedding for d in resp.data)
    assert a == b and a != c and len(a) == 1536
    assert resp.usage.prompt_tokens == 2 + 2 + 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_standalone_process_with_http_control() -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.stubs.openai_stub", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=5) as http:
            deadline = time.monotonic() + 30
            while True:
                try:
                    http.get("/_stub/requests")
                    break
                except httpx.TransportError:
                    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                    assert time.monotonic() < deadline, "stub did not start"
                    time.sleep(0.1)
            http.post("/_stub/fail", json={"status": 503, "count": 1, "retry_after": 2})
            http.post("/_stub/chat_reply", json={"text": "pong"})
            auth = {"authorization": "Bearer sk-x"}
            body = {"model": "gpt-stub", "messages": [{"role": "user", "content": "ping"}]}
            failed = http.post("/v1/chat/completions", json=body, headers=auth)
            assert failed.status_code == 503 and failed.headers["retry-after"] == "2"
            ok = http.post("/v1/chat/completions", json=body, headers=auth)
            assert ok.json()["choices"][0]["message"]["content"] == "pong"
            log = http.get("/_stub/requests").json()
            assert [(r["path"], r["status"]) for r in log] == [
                ("/v1/chat/completions", 503),
                ("/v1/chat/completions", 200),
            ]
            http.post("/_stub/reset")
            assert http.get("/_stub/requests").json() == []
    finally:
        proc.terminate()
        proc.wait(timeout=10)
