"""Cited chat over a user's notes: retrieve → numbered sections within a token budget →
the chat model (or an extractive answer) → references cleaned → citations actually used."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import structlog
from bson import ObjectId

from api.chat.answer import EXTRACTIVE_PREFIX, FALLBACK_PREFIX, extractive_answer
from api.chat.context import build_context, relevant_or_nothing
from api.chat.prompts import build_messages
from api.chat.references import remove_invented_refs, used_citations
from api.chat.safety import neutralise
from api.chat.streaming import AnswerStream
from api.chat.types import ChatEvent, ChatResult, Citation, Retrieved
from api.retrieval.service import RetrievalService
from api.retrieval.types import SearchFilters
from connectors.chat import ChatError, ChatMessage, ChatModel

log = structlog.get_logger(__name__)

MAX_HISTORY_MESSAGES = 10
MAX_HISTORY_CHARS = 12_000


def _warnings(*parts: str | None) -> str | None:
    return "; ".join(p for p in parts if p) or None


def _trim_history(history: list[ChatMessage]) -> list[ChatMessage]:
    kept: list[ChatMessage] = []
    total = 0
    for message in reversed(history[-MAX_HISTORY_MESSAGES:]):
        total += len(message["content"])
        if total > MAX_HISTORY_CHARS:
            break
        kept.append(message)
    return list(reversed(kept))


class ChatService:
    """Answers a user's question from that user's notes only (retrieval is author-scoped;
    the model sees nothing else, so nothing else can be cited or revealed)."""

    def __init__(
        self,
        search: RetrievalService,
        model: ChatModel | None,
        count_tokens: Callable[[str], int],
        *,
        context_tokens: int,
        notes_limit: int = 6,
        max_sections: int = 8,
        min_relevance: float = 0.0,
    ) -> None:
        self.search = search
        self.model = model
        self.count_tokens = count_tokens
        self.context_tokens = context_tokens
        self.notes_limit = notes_limit
        self.max_sections = max_sections
        self.min_relevance = min_relevance

    async def context(
        self, author_id: ObjectId, message: str, filters: SearchFilters | None
    ) -> Retrieved:
        """The numbered sections for `message` (what the model would see), none when no
        section's estimated relevance reaches `min_relevance`; with the search's warning
        when it fell back to keywords."""
        outcome = await self.search.search(
            author_id, message, limit=self.notes_limit, chunks_per_note=3, filters=filters
        )
        # Tokenising the sections takes milliseconds to tens of them: off the event loop.
        context, citations = await asyncio.to_thread(
            build_context,
            relevant_or_nothing(outcome.results, self.min_relevance),
            budget_tokens=self.context_tokens,
            count_tokens=self.count_tokens,
            max_sections=self.max_sections,
        )
        return Retrieved(context, citations, outcome.warning)

    def _finish(self, raw: str, citations: list[Citation]) -> tuple[str, list[Citation]]:
        answer = final_answer(raw, {c.ref for c in citations})
        return answer, used_citations(answer, citations)

    def _extractive(self, message: str, found: Retrieved, warning: str | None = None) -> ChatResult:
        prefix = EXTRACTIVE_PREFIX if warning is None else FALLBACK_PREFIX
        answer, refs = extractive_answer(message, found.citations, prefix=prefix)
        used = [c for c in found.citations if c.ref in set(refs)]
        return ChatResult(
            answer=neutralise(answer),  # quotes of notes: what a note holds is data too
            citations=used,
            mode="extractive",
            warning=_warnings(found.warning, warning),
        )

    def _llm(
        self, model: ChatModel, answer: str, used: list[Citation], found: Retrieved
    ) -> ChatResult:
        return ChatResult(
            answer=answer, citations=used, mode="llm", model=model.model, warning=found.warning
        )

    async def answer(
        self,
        author_id: ObjectId,
        message: str,
        history: list[ChatMessage],
        filters: SearchFilters | None,
    ) -> ChatResult:
        started = time.perf_counter()
        found = await self.context(author_id, message, filters)
        if self.model is None or not found.citations:  # nothing relevant: no model call
            return self._extractive(message, found)
        messages = build_messages(found.context, message, _trim_history(history))
        try:
            raw = await self.model.complete(messages)
        except ChatError as exc:
            log.warning("chat.model_failed", error=str(exc)[:300])
            return self._extractive(
                message, found, warning=f"chat model unavailable ({exc}); extractive answer"
            )
        answer, used = self._finish(raw, found.citations)
        if not answer:  # nothing, or only references the context did not hold
            return self._extractive(message, found, warning=_EMPTY_WARNING)
        log.info(
            "chat.answered",
            refs=len(found.citations),
            cited=len(used),
            took_ms=round((time.perf_counter() - started) * 1000, 1),
        )
        return self._llm(self.model, answer, used, found)

    async def stream(
        self,
        author_id: ObjectId,
        message: str,
        history: list[ChatMessage],
        filters: SearchFilters | None,
    ) -> AsyncIterator[ChatEvent]:
        """The same answer as `answer`, as events. Tokens are the final answer as the model
        writes it: what the final answer would change (a reference the context did not
        hold, an image, raw HTML) is held back until it is settled (`streaming`), so the
        tokens joined are the `done` answer. The final `done` event carries that answer and
        the used citations (identical to the JSON response). When the model's streamed
        answer is replaced by the extractive one (the model failed mid-answer, or its
        answer held no reference the context had), or a construct changed meaning only at
        its end, a `reset` event says to discard the tokens shown so far."""
        found = await self.context(author_id, message, filters)
        citations = found.citations
        yield ChatEvent("citations", {"citations": [citation_dict(c) for c in citations]})
        if self.model is None or not citations:
            result = self._extractive(message, found)
            yield ChatEvent("token", {"text": result.answer})
            yield ChatEvent("done", result_dict(result))
            return
        valid = {c.ref for c in citations}
        stream = AnswerStream(lambda raw: final_answer(raw, valid))
        deltas = 0
        warning = _EMPTY_WARNING
        try:
            async for delta in self.model.stream(
                build_messages(found.context, message, _trim_history(history))
            ):
                deltas += 1
                if shown := stream.push(delta):
                    yield ChatEvent("token", {"text": shown})
        except ChatError as exc:
            # Mid-answer too: the JSON path answers with quotes here, so the stream does.
            log.warning("chat.stream_failed", error=str(exc)[:300], deltas=deltas)
            warning = f"chat model unavailable ({exc}); extractive answer"
        else:
            answer, rest, reset = stream.close()
            if answer:
                if reset:
                    log.info("chat.stream_reset", shown=len(stream.shown), answer=len(answer))
                    yield ChatEvent("reset", {"reason": _CHANGED_AT_END})
                if rest:
                    yield ChatEvent("token", {"text": rest})
                used = used_citations(answer, citations)
                yield ChatEvent("done", result_dict(self._llm(self.model, answer, used, found)))
                return
        # The model failed, or answered nothing but references the context did not hold.
        result = self._extractive(message, found, warning=warning)
        if deltas:  # the model's answer is replaced: discard whatever of it was shown
            yield ChatEvent("reset", {"reason": warning})
        yield ChatEvent("token", {"text": result.answer})
        yield ChatEvent("done", result_dict(result))


_EMPTY_WARNING = "chat model returned an empty answer; extractive answer"
_CHANGED_AT_END = "the end of the answer changed how text shown before it reads; the answer follows"


def final_answer(raw: str, valid: set[int]) -> str:
    """A model's answer as returned: references the context did not hold removed, then
    what a note may have injected neutralised (`safety`); in this order, since dropping a
    marker can join what was apart (`![x]` + `[9]` + `(url)`), never the other way."""
    return neutralise(remove_invented_refs(raw, valid))


def citation_dict(c: Citation) -> dict[str, Any]:
    return {
        "ref": c.ref,
        "note_id": c.note_id,
        "title": c.title,
        "heading_path": c.heading_path,
        "start_offset": c.start_offset,
        "end_offset": c.end_offset,
        "snippet": c.snippet,
        "note_version": c.note_version,
        "relevance": c.relevance,
    }


def result_dict(r: ChatResult) -> dict[str, Any]:
    return {
        "answer": r.answer,
        "citations": [citation_dict(c) for c in r.citations],
        "mode": r.mode,
        "model": r.model,
        "warning": r.warning,
    }
