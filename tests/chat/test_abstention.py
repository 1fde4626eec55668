"""Chat abstains when the notes cannot answer, and still cites the answer when they can:
20 answerable and 20 unanswerable questions (benchmarks/data/docs_pages/abstention.yaml,
about six documentation pages of the held-out split) asked through the API with the local
model and the default CHAT_MIN_RELEVANCE, without a chat model (extractive) and with one
(the real openai client against the local stub, which cites every section it is given)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from api.chat.answer import NOTHING_MATCHES
from api.evaluation.sections import all_sections
from tests.conftest import Api, running_app
from tests.helpers import wait_indexed

DOCS = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "docs_pages"
SET = yaml.safe_load((DOCS / "abstention.yaml").read_text(encoding="utf-8"))
MANIFEST = yaml.safe_load((DOCS / "src" / "manifest.yaml").read_text(encoding="utf-8"))
TITLES = {e["id"]: e["title"] for e in MANIFEST}
_REF = re.compile(r'<section-data ref="(\d+)"')


def _page(page: str) -> str:
    return (DOCS / "src" / "pages" / f"{page}.md").read_text(encoding="utf-8")


def _gold_span(page: str, heading: str) -> tuple[int, int]:
    wanted = tuple(h.strip() for h in heading.split(" > ")) if heading else ()
    sections = all_sections(_page(page), TITLES[page])
    [section] = [s for s in sections if s.headings == wanted and not s.is_empty]
    return section.span


def _cite_everything(body: dict[str, Any]) -> str:
    """The stub model's answer: one sentence citing every numbered section it was given."""
    text = "\n".join(str(m.get("content")) for m in body["messages"])
    refs = sorted({int(n) for n in _REF.findall(text)})
    return "Your notes cover this " + " ".join(f"[{n}]" for n in refs) + "."


async def _ask(api: Api, h: dict[str, str], question: str) -> dict[str, Any]:
    r = await api.client.post("/v1/chat", json={"message": question}, headers=h)
    assert r.status_code == 200, r.text
    return r.json()


@asynccontextmanager
async def _app(mode: str, make_settings: Any, stub: Any) -> AsyncIterator[Api]:
    if mode == "extractive":
        settings = make_settings()
    else:
        stub.set_chat_reply(_cite_everything)
        settings = make_settings(
            chat_model="gpt-test",
            openai_api_key="sk-test",
            openai_base_url=stub.base_url,
            embedding_provider="local",
        )
    async with running_app(settings) as app:
        yield app


@pytest.mark.parametrize("mode", ["extractive", "model"])
async def test_unanswerable_questions_get_no_citation_and_answerable_ones_cite_the_gold(
    make_settings: Any, openai_stub: Any, mode: str
) -> None:
    async with _app(mode, make_settings, openai_stub) as api:
        h = await api.new_user()
        ids = {}
        for page in SET["pages"]:
            r = await api.client.post(
                "/v1/notes", json={"title": TITLES[page], "content_md": _page(page)}, headers=h
            )
            ids[page] = r.json()["id"]
        for note_id in ids.values():
            await wait_indexed(api, h, note_id, timeout_s=300)

        quiet = []
        for question in SET["unanswerable"]:
            calls = len(openai_stub.requests_to("/v1/chat/completions"))
            body = await _ask(api, h, question)
            if not body["citations"]:
                assert body["answer"] == NOTHING_MATCHES and body["mode"] == "extractive"
                # the model is not asked when nothing is relevant
                assert len(openai_stub.requests_to("/v1/chat/completions")) == calls
                quiet.append(question)
        cited = []
        for item in SET["answerable"]:
            body = await _ask(api, h, item["q"])
            if body["citations"]:  # answered, not abstained: by the model when there is one
                assert body["mode"] == ("llm" if mode == "model" else "extractive"), body
            start, end = _gold_span(item["page"], item["h"])
            hit = any(
                c["note_id"] == ids[item["page"]]
                and c["start_offset"] < end
                and start < c["end_offset"]
                and 0.0 <= c["relevance"] <= 1.0
                for c in body["citations"]
            )
            if hit:
                cited.append(item["q"])
    missed = [q for q in SET["unanswerable"] if q not in quiet]
    uncited = [i["q"] for i in SET["answerable"] if i["q"] not in cited]
    assert len(quiet) >= 18, f"cited for unanswerable questions: {missed}"
    assert len(cited) >= 18, f"gold not cited: {uncited}"


@pytest.mark.parametrize("stream", [False, True])
async def test_nothing_relevant_means_no_model_call_and_no_reference(
    make_settings: Any, openai_stub: Any, stream: bool
) -> None:
    from tests.chat.test_chat_api import streamed

    settings = make_settings(
        chat_model="gpt-test",
        openai_api_key="sk-test",
        openai_base_url=openai_stub.base_url,
        embedding_provider="local",
    )
    async with running_app(settings) as app:
        h = await app.new_user()
        r = await app.client.post(
            "/v1/notes",
            json={"title": "Backups", "content_md": "The nightly pg_dump runs at 02:00 UTC."},
            headers=h,
        )
        await wait_indexed(app, h, r.json()["id"])
        calls = len(openai_stub.requests)
        question = {"message": "What is the capital of Australia?"}
        if stream:
            events = await streamed(app, h, question)
            assert events[0] == ("citations", {"citations": []})
            done = events[-1][1]
        else:
            done = (await app.client.post("/v1/chat", json=question, headers=h)).json()
        assert done["citations"] == [] and done["answer"] == NOTHING_MATCHES
        assert len(openai_stub.requests) == calls  # the model was not asked
