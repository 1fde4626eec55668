"""Chat on its own OpenAI-compatible server (CHAT_BASE_URL, CHAT_API_KEY), apart from
embeddings: the real `openai` client against the local stub standing in for a local chat
server (Ollama, llama.cpp), beside local or OpenAI embeddings (docs/chat.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from api.config import SettingsError, load_settings
from tests.conftest import running_app
from tests.helpers import wait_indexed
from tests.stubs.fixtures import StubServer

NOTE = "## Nightly\n\nThe pg_dump job runs at 02:00 UTC.\n\n## Restore\n\nUse pg_restore --clean."


@pytest.fixture
def chat_server() -> Iterator[StubServer]:
    """A second stub: the local chat server, apart from the embeddings' stub."""
    with StubServer() as server:
        server.set_chat_reply("The backup runs at 02:00 UTC [1].")
        yield server


async def ask(settings: Any) -> dict[str, Any]:
    async with running_app(settings) as api:
        h = await api.new_user()
        r = await api.client.post(
            "/v1/notes", json={"title": "Backups", "content_md": NOTE}, headers=h
        )
        await wait_indexed(api, h, r.json()["id"])
        resp = await api.client.post(
            "/v1/chat", json={"message": "When does the backup run?"}, headers=h
        )
        assert resp.status_code == 200, resp.text
        return resp.json()


async def test_local_chat_server_beside_local_embeddings(
    make_settings: Any, chat_server: StubServer
) -> None:
    """The recipe: no OpenAI at all, CHAT_BASE_URL + CHAT_MODEL, no key."""
    settings = make_settings(chat_base_url=chat_server.base_url, chat_model="llama3.2")
    assert settings.resolved_embedding_provider == "local"
    body = await ask(settings)
    assert body["mode"] == "llm" and body["model"] == "llama3.2"
    assert body["answer"] == "The backup runs at 02:00 UTC [1]." and body["citations"]
    (request,) = chat_server.requests_to("/v1/chat/completions")
    assert request.body["model"] == "llama3.2"
    assert request.headers["authorization"] == "Bearer unused"
    assert not chat_server.requests_to("/v1/embeddings")


async def test_local_chat_server_beside_openai_embeddings(
    make_settings: Any, openai_stub: StubServer, chat_server: StubServer
) -> None:
    settings = make_settings(
        embedding_provider="openai",
        embedding_dimensions=64,
        openai_api_key="sk-embeddings",
        openai_base_url=openai_stub.base_url,
        chat_base_url=chat_server.base_url,
        chat_api_key="sk-chat",
        chat_model="qwen2.5",
    )
    body = await ask(settings)
    assert body["mode"] == "llm" and body["model"] == "qwen2.5"
    embeddings = openai_stub.requests_to("/v1/embeddings")
    assert embeddings and {r.headers["authorization"] for r in embeddings} == {
        "Bearer sk-embeddings"
    }
    assert not openai_stub.requests_to("/v1/chat/completions")
    chats = chat_server.requests_to("/v1/chat/completions")
    assert [r.headers["authorization"] for r in chats] == ["Bearer sk-chat"]
    assert not chat_server.requests_to("/v1/embeddings")


async def test_chat_base_url_alone_falls_back_to_the_openai_key(
    make_settings: Any, chat_server: StubServer
) -> None:
    # make_settings keeps the local embedder (EMBEDDING_PROVIDER=local) despite the key.
    settings = make_settings(
        openai_api_key="sk-shared", chat_base_url=chat_server.base_url, chat_model="m"
    )
    await ask(settings)
    (request,) = chat_server.requests_to("/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer sk-shared"


async def test_without_chat_settings_chat_shares_the_embeddings_server(
    make_settings: Any, openai_stub: StubServer
) -> None:
    settings = make_settings(
        openai_api_key="sk-one", openai_base_url=openai_stub.base_url, chat_model="gpt-test"
    )
    body = await ask(settings)
    assert body["mode"] == "llm"
    (request,) = openai_stub.requests_to("/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer sk-one"


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"chat_base_url": "localhost:11434"}, "CHAT_BASE_URL"),
        ({"chat_model": "llama3.2"}, "CHAT_MODEL"),
    ],
)
def test_bad_chat_settings_name_the_variable(values: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        load_settings(openai_api_key=None, openai_base_url=None, **values)


def test_a_chat_server_alone_is_enough_for_chat_model() -> None:
    settings = load_settings(
        openai_api_key=None,
        openai_base_url=None,
        chat_base_url="http://127.0.0.1:11434/v1",
        chat_model="llama3.2",
    )
    assert settings.chat_server_configured
    assert settings.resolved_embedding_provider == "local"
