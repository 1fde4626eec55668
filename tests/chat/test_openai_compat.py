"""/v1/chat/completions and /v1/models through the real `openai` client."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import openai
import pytest

from tests.chat.test_chat_api import BACKUPS, add
from tests.conftest import Api, running_app

QUESTION = "When does the nightly backup run?"


@asynccontextmanager
async def client_for(api: Api, headers: dict[str, str]) -> AsyncIterator[openai.AsyncOpenAI]:
    """An OpenAI client speaking to the in-process app with the user's API key."""
    key = headers["Authorization"].removeprefix("Bearer ")
    transport = httpx.ASGITransport(app=api.app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        yield openai.AsyncOpenAI(
            base_url="http://test/v1", api_key=key, http_client=http, max_retries=0
        )


async def ask(client: openai.AsyncOpenAI, question: str, **kw: Any) -> Any:
    return await client.chat.completions.create(
        model="autonote",
        messages=[
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Hello!\n\n**Sources**\n- [1] x"},
            {"role": "user", "content": question},
        ],
        temperature=0.2,
        **kw,
    )


async def streamed(client: openai.AsyncOpenAI, question: str) -> tuple[str, list[Any]]:
    """The content joined and the chunks of a streamed answer."""
    chunks = [c async for c in await ask(client, question, stream=True)]
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices), chunks


def nightly(citations: list[dict[str, Any]]) -> dict[str, Any]:
    return next(c for c in citations if "02:00" in BACKUPS[c["start_offset"] : c["end_offset"]])


async def test_a_cited_answer_json_and_stream(api: Api) -> None:
    h = await api.new_user()
    n = await add(api, h, "Postgres backups", BACKUPS)
    async with client_for(api, h) as client:
        done = await ask(client, QUESTION)
        content, chunks = await streamed(client, QUESTION)
    assert done.object == "chat.completion" and done.model == "autonote"
    assert done.choices[0].finish_reason == "stop"
    assert done.choices[0].message.role == "assistant"
    text = done.choices[0].message.content
    answer, _, sources = text.partition("\n\n**Sources**\n")
    assert "02:00 UTC" in answer and sources
    cite = nightly(done.citations)
    assert cite["note_id"] == n["id"]
    assert cite["heading_path"] == ["Postgres backups", "Nightly backup"]
    assert f"[{cite['ref']}]" in answer
    assert f"- [{cite['ref']}] Postgres backups › Nightly backup" in sources
    assert {int(x) for x in re.findall(r"\[(\d+)\]", answer)} == {c["ref"] for c in done.citations}
    # The stream: role first, the same content, a last chunk with the citations.
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert content == text
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop" and last.citations == done.citations
    assert last.reset is False


async def test_models_list(api: Api) -> None:
    h = await api.new_user()
    async with client_for(api, h) as client:
        models = await client.models.list()
    assert [m.id for m in models.data] == ["autonote"]


async def test_another_users_notes_are_never_cited(api: Api) -> None:
    alice = await api.new_user()
    mallory = await api.new_user()
    secret = await add(api, alice, "Alice bank", "## PIN\n\nMy card PIN is 8042.")
    await add(api, mallory, "Mallory notes", "## Lunch\n\nSandwiches on Friday.")
    async with client_for(api, mallory) as client:
        done = await ask(client, "what is the card PIN?")
        content, chunks = await streamed(client, "card PIN")
    for text in (done.model_dump_json(), content, chunks[-1].model_dump_json()):
        assert "8042" not in text and secret["id"] not in text and "Alice bank" not in text


async def test_no_key_is_401_and_a_bad_body_is_422(api: Api) -> None:
    h = await api.new_user()
    async with client_for(api, {"Authorization": "Bearer nope"}) as client:
        with pytest.raises(openai.AuthenticationError):
            await ask(client, QUESTION)
        with pytest.raises(openai.AuthenticationError):
            await client.models.list()
    r = await api.client.post("/v1/chat/completions", json={"messages": []})
    assert r.status_code == 401
    for body in (
        {"messages": []},
        {"messages": [{"role": "user", "content": "  "}]},
        {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]},
        {"messages": [{"role": "tool", "content": "x"}]},
        {"messages": [{"role": "user", "content": "x"}], "stream": "yes"},
        {"messages": [{"role": "user", "content": "x"}], "temperature": "hot"},
        {"messages": "x"},
    ):
        r = await api.client.post("/v1/chat/completions", json=body, headers=h)
        assert r.status_code == 422, body
        assert set(r.json()) >= {"error", "detail"}
    ok = {"messages": [{"role": "user", "content": "x"}], "frequency_penalty": 0, "seed": 3}
    r = await api.client.post("/v1/chat/completions", json=ok, headers=h)
    assert r.status_code == 200, r.text  # unknown OpenAI fields are ignored


async def test_with_the_chat_model(make_settings: Any, openai_stub: Any) -> None:
    settings = make_settings(
        chat_model="gpt-test",
        openai_api_key="sk-test",
        openai_base_url=openai_stub.base_url,
        embedding_provider="local",
    )
    async with running_app(settings) as api:
        h = await api.new_user()
        await add(api, h, "Postgres backups", BACKUPS)
        openai_stub.set_chat_reply("It runs at 02:00 UTC [1].")
        async with client_for(api, h) as client:
            done = await ask(client, QUESTION)
            content, chunks = await streamed(client, QUESTION)
    assert done.choices[0].message.content.startswith("It runs at 02:00 UTC [1].\n\n**Sources**")
    assert content == done.choices[0].message.content
    assert [c["ref"] for c in done.citations] == [1] == [c["ref"] for c in chunks[-1].citations]
    sent = openai_stub.requests_to("/v1/chat/completions")[-1].body["messages"]
    assert "You are a helpful assistant." not in str(sent)  # system messages are dropped
    assert {"role": "assistant", "content": "Hello!"} in sent  # history without Sources


async def test_a_reset_mid_stream_is_a_rule_then_the_answer(
    make_settings: Any, openai_stub: Any
) -> None:
    """The model breaks off after a few tokens: OpenAI chunks cannot retract, so the text
    shown, a rule, then the extractive answer; the last chunk says `reset`."""
    settings = make_settings(
        chat_model="gpt-test",
        openai_api_key="sk-test",
        openai_base_url=openai_stub.base_url,
        embedding_provider="local",
    )
    async with running_app(settings) as api:
        h = await api.new_user()
        await add(api, h, "Postgres backups", BACKUPS)
        openai_stub.set_chat_reply("The backup runs nightly at 02:00 UTC [1].")
        openai_stub.break_next_stream(3, "error")
        async with client_for(api, h) as client:
            content, chunks = await streamed(client, QUESTION)
    shown, _, rest = content.partition("\n\n---\n\n")
    assert shown == "The backup runs" and "02:00 UTC" in rest and "**Sources**" in rest
    assert chunks[-1].reset is True and chunks[-1].citations
