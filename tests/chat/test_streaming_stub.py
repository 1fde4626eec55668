"""Streamed chat through the real `openai` client against the local stub, with the model's
answer cut at every position: SSE tokens joined are exactly the `done` answer, and no
token ever shows a reference the context did not hold."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from bson import ObjectId
from openai import AsyncOpenAI

from api.chat.references import cited_refs
from api.chat.service import ChatService
from api.retrieval.types import NoteResult, SectionMatch
from api.tokenizer import tiktoken_tokenizer
from connectors.openai_chat import OpenAIChatModel


@dataclass
class _Outcome:
    results: list[NoteResult]
    warning: str | None = None


class FixedSearch:
    """A search that finds `sections` sections, one per note, best first."""

    def __init__(self, sections: int) -> None:
        self.results = [
            NoteResult(
                note_id=f"n{i}",
                title=f"Note {i}",
                tags=[],
                updated_at=datetime.now(UTC),
                score=1.0 - i / 100,
                matching_chunks=[
                    SectionMatch(
                        chunk_ids=[f"c{i}"],
                        chunk_indexes=[0],
                        heading_path=[f"Note {i}"],
                        section_path=f"Note {i}",
                        content_md=f"Section {i} says the backup runs nightly.",
                        start_offset=0,
                        end_offset=41,
                        score=1.0 - i / 100,
                    )
                ],
            )
            for i in range(1, sections + 1)
        ]

    async def search(self, *_: Any, **__: Any) -> _Outcome:
        return _Outcome(self.results)


def chat_service(client: AsyncOpenAI, sections: int) -> ChatService:
    return ChatService(
        FixedSearch(sections),  # type: ignore[arg-type]
        OpenAIChatModel(client, "gpt-test", max_retries=0),
        tiktoken_tokenizer("cl100k_base").count,
        context_tokens=20_000,
        max_sections=16,
    )


async def streamed(service: ChatService) -> list[tuple[str, Any]]:
    return [(e.event, e.data) async for e in service.stream(ObjectId(), "backup?", [], None)]


def check(events: list[tuple[str, Any]], valid: set[int]) -> str:
    """The done answer, after checking that the tokens are it, piece by piece."""
    names = [name for name, _ in events]
    assert names[0] == "citations" and names[-1] == "done" and "reset" not in names, names
    shown = ""
    for name, data in events:
        if name == "token":
            shown += data["text"]
            assert set(cited_refs(shown)) <= valid, shown
    done = events[-1][1]
    assert shown == done["answer"]
    assert {c["ref"] for c in done["citations"]} == set(cited_refs(done["answer"]))
    return done["answer"]


REPLIES = [
    # (model answer, sections in the context, the answer returned)
    ("It runs nightly [1]. See also [9].", 4, "It runs nightly [1]. See also."),
    ("Use items[0], not [0] [2].", 4, "Use items[0], not [0] [2]."),
    ("Both [12] and [3].", 12, "Both [12] and [3]."),
    ("Both [12] and [3].", 4, "Both and [3]."),
    ("Step [3[9]] applies [1].", 4, "Step [3\\[9\\]] applies [1]."),
    ("Nightly, see [2]", 4, "Nightly, see [2]"),
    ("Nightly, see [9]", 4, "Nightly, see"),
    ("See [9]then restore [1].", 4, "See then restore [1]."),
    ("Restore [1].\n\nSources: [9], [10].", 4, "Restore [1]."),
]


@pytest.mark.parametrize(("reply", "sections", "expected"), REPLIES)
async def test_a_reply_streamed_a_character_at_a_time(
    openai_stub: Any, openai_stub_client: AsyncOpenAI, reply: str, sections: int, expected: str
) -> None:
    """Every position is a chunk boundary: each marker arrives split across chunks."""
    service = chat_service(openai_stub_client, sections)
    openai_stub.set_chat_reply(list(reply))
    events = await streamed(service)
    assert check(events, set(range(1, sections + 1))) == expected
    assert sum(name == "token" for name, _ in events) > 1  # it did stream


@pytest.mark.parametrize(
    "reply",
    ["It runs nightly [1]. See also [9].", "Step [3[9]] applies [1].", "Both [12] and [3]."],
)
async def test_a_reply_cut_in_two_at_every_position(
    openai_stub: Any, openai_stub_client: AsyncOpenAI, reply: str
) -> None:
    service = chat_service(openai_stub_client, 4)
    answers = set()
    for cut in range(1, len(reply)):
        openai_stub.set_chat_reply([reply[:cut], reply[cut:]])
        answers.add(check(await streamed(service), {1, 2, 3, 4}))
    assert len(answers) == 1  # wherever the cut, the same answer
    json_answer = await service.answer(ObjectId(), "backup?", [], None)
    assert answers == {json_answer.answer}
