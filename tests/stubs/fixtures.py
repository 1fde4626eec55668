"""Run the OpenAI stub in-process: `StubServer` and the pytest fixtures around it.

Use from a conftest.py (pytest collects fixtures from the conftest's namespace, so import
the session-scoped server fixture too — `openai_stub` depends on it):

    from tests.stubs.fixtures import openai_stub, openai_stub_client, openai_stub_server  # noqa

One server serves the whole session (starting uvicorn costs ~0.2 s); `openai_stub` resets
its state around every test, so failures, delays, the chat reply and the request log never
leak between tests.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Literal

import pytest
import uvicorn
from openai import AsyncOpenAI

from tests.stubs.openai_stub import ChatReply, LoggedRequest, StubState, create_app

__all__ = ["StubServer", "openai_stub", "openai_stub_client", "openai_stub_server"]


class StubServer:
    """The stub served by uvicorn in a background thread (tests, benchmarks).

    `port=0` binds a free port; the socket is bound before the thread starts, so there is no
    window in which another process could take the port.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.state = StubState()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.host, self.port = self._sock.getsockname()[:2]
        config = uvicorn.Config(
            create_app(self.state),
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Root URL, e.g. http://127.0.0.1:PORT."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What to pass as the OpenAI client's `base_url` (".../v1")."""
        return f"{self.url}/v1"

    def start(self, timeout_s: float = 10.0) -> StubServer:
        """Serve in a daemon thread; return once the server accepts connections."""
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._sock]},
            daemon=True,
            name="openai-stub",
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("openai stub failed to start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Ask uvicorn to exit and wait for the thread."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._sock.close()

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # Test-facing controls, delegated to the shared state.

    @property
    def requests(self) -> list[LoggedRequest]:
        """API requests received so far (control calls excluded), oldest first."""
        return self.state.requests

    def requests_to(self, path: str) -> list[LoggedRequest]:
        """The logged requests whose path is `path` (e.g. "/v1/embeddings")."""
        return [r for r in self.state.requests if r.path == path]

    def fail_next(
        self, status: int, count: int = 1, retry_after: float | None = None, path: str | None = None
    ) -> None:
        """Answer the next `count` API requests with `status` (see `StubState.fail_next`)."""
        self.state.fail_next(status, count, retry_after, path)

    def set_delay(self, seconds: float, count: int | None = None) -> None:
        """Delay the next `count` API requests (all if None) by `seconds`."""
        self.state.set_delay(seconds, count)

    def set_chat_reply(self, reply: ChatReply | None, *, refusal: bool = False) -> None:
        """Reply text, the pieces a streamed reply is sent in, or a function of the request
        body giving either, for chat completions; with `refusal`, sent as the model's
        refusal (see `StubState.set_chat_reply`)."""
        self.state.set_chat_reply(reply, refusal=refusal)

    def break_next_stream(self, after_pieces: int, how: Literal["error", "drop"]) -> None:
        """Break the next streamed chat answer off (see `StubState.break_next_stream`)."""
        self.state.break_next_stream(after_pieces, how)

    def reset(self) -> None:
        """Back to defaults: no failures, no delay, default reply, empty request log."""
        self.state.reset()


@pytest.fixture(scope="session")
def openai_stub_server() -> Iterator[StubServer]:
    """One stub server for the whole test session."""
    with StubServer() as server:
        yield server


@pytest.fixture
def openai_stub(openai_stub_server: StubServer) -> Iterator[StubServer]:
    """The session's stub server with fresh state for this test."""
    openai_stub_server.reset()
    yield openai_stub_server
    openai_stub_server.reset()


@pytest.fixture
async def openai_stub_client(openai_stub: StubServer) -> AsyncIterator[AsyncOpenAI]:
    """A real `AsyncOpenAI` client pointed at the stub, SDK retries off."""
    client = AsyncOpenAI(base_url=openai_stub.base_url, api_key="sk-stub", max_retries=0)
    try:
        yield client
    finally:
        await client.close()
