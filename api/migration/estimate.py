"""The dry run: what a migration would chunk, embed and cost, changing nothing.

Every selected note goes through the real chunker; tokens are the embedding model's own
tokenizer count of each chunk's `embedding_text` (what the provider bills). A chunk is
"reusable" when the reconciler would take its vector instead of embedding it: the same
text (content hash) already embedded by this model for the same author, in the embedding
cache, or earlier in the same note/batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog

from api.migration.repository import ESTIMATE_PROJECTION, MigrationNotes, ReuseLookup
from api.migration.selection import REASONS, Selection, reason, unaddressable_detail
from api.notes.stored import check_indexable, note_content, note_title

# The prices live with the providers (a re-embed at start-up estimates its cost too).
from api.providers import PRICE_PER_MILLION_TOKENS, cost_usd, price_per_million  # noqa: F401

log = structlog.get_logger(__name__)


@dataclass
class Estimate:
    """Totals of a dry run. `tokens` = every chunk; `tokens_to_embed` = what would be billed."""

    model: str
    price_per_million: float | None
    notes: int = 0
    chunks: int = 0
    tokens: int = 0
    reusable_chunks: int = 0
    reusable_tokens: int = 0
    tokens_to_embed: int = 0
    reasons: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    unchunkable: list[tuple[str, str]] = field(default_factory=list)  # the first ones
    unchunkable_count: int = 0
    out_of_attempts: int = 0  # to be recorded failed, not indexed (`out_of_attempts`)

    def add_unchunkable(self, note_id: Any, error: str) -> None:
        """Count a note the chunker cannot take; list the first `MAX_LISTED_UNCHUNKABLE`
        (a bound, so a database of broken notes cannot fill memory with the list)."""
        self.notes += 1
        self.unchunkable_count += 1
        if len(self.unchunkable) < MAX_LISTED_UNCHUNKABLE:
            self.unchunkable.append((str(note_id), error))

    @property
    def cost_usd(self) -> float | None:
        return cost_usd(self.tokens_to_embed, self.price_per_million)

    def add_note(
        self,
        author: Any,
        chunks: list[tuple[str, int]],
        *,
        known: set[tuple[Any, str]],
        cached: set[tuple[Any, str]],
        seen: set[tuple[Any, str]],
    ) -> None:
        """Count one note's `(content_hash, tokens)` chunks. `known`: (author, hash) pairs
        with a stored vector; `cached`: those in the embedding cache; `seen`: pairs already
        counted as embedded in this batch (updated here)."""
        self.notes += 1
        for content_hash, tokens in chunks:
            self.chunks += 1
            self.tokens += tokens
            key = (author, content_hash)
            if key in known or key in cached or key in seen:
                self.reusable_chunks += 1
                self.reusable_tokens += tokens
            else:
                self.tokens_to_embed += tokens
                seen.add(key)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (the `--json` output)."""
        return {
            "dry_run": True,
            "notes": self.notes,
            "chunks": self.chunks,
            "tokens": self.tokens,
            "reusable_chunks": self.reusable_chunks,
            "reusable_tokens": self.reusable_tokens,
            "tokens_to_embed": self.tokens_to_embed,
            "embedding_model": self.model,
            "price_per_million_tokens_usd": self.price_per_million,
            "estimated_cost_usd": self.cost_usd,
            "reasons": {k: v for k, v in self.reasons.items() if v},
            "unchunkable": [{"note_id": n, "error": e} for n, e in self.unchunkable],
            "unchunkable_count": self.unchunkable_count,
            "out_of_attempts": self.out_of_attempts,
        }


# A dry-run page also stops at this much note text: a page is chunked at once, in memory
# several times the size of its text.
PAGE_CHARS = 16_000_000
MAX_LISTED_UNCHUNKABLE = 1000


def out_of_attempts(doc: dict[str, Any], now: datetime, max_attempts: int) -> bool:
    """A note whose last runs died with their process (`indexing`, lease run out) and that
    has no attempt left: the run records it `failed` without chunking or embedding it
    (`MigrationRunner`, verdict `failed`), so it is no work to estimate."""
    lease, attempts = doc.get("lease_expires_at"), doc.get("index_attempts")
    return (
        doc.get("index_status") == "indexing"
        and isinstance(lease, datetime)
        and lease <= now
        and isinstance(attempts, int)
        and attempts >= max_attempts
    )


def chunk_batch(
    chunker: Any, tokenizer: Any, docs: list[dict[str, Any]]
) -> list[list[tuple[str, int]] | Exception]:
    """Per note, its chunks as (content_hash, embedding_text tokens), or the chunker's
    exception. Tokens are counted in one batched call (many tiny calls cost far more)."""
    per_note: list[list[Any] | Exception] = []
    texts: list[str] = []
    for doc in docs:
        try:
            check_indexable(doc)
            chunks = chunker.chunk_note(note_content(doc), note_title(doc))
        except Exception as exc:  # hostile input: report it, estimate the rest
            per_note.append(exc)
            continue
        per_note.append(chunks)
        texts.extend(c.embedding_text for c in chunks)
    counts = iter(tokenizer.count_batch(texts) if texts else [])
    out: list[list[tuple[str, int]] | Exception] = []
    for chunks in per_note:
        if isinstance(chunks, Exception):
            out.append(chunks)
        else:
            out.append([(c.content_hash, next(counts)) for c in chunks])
    return out


async def estimate(
    notes: MigrationNotes,
    reuse: ReuseLookup,
    selection: Selection,
    *,
    chunker: Any,
    tokenizer: Any,
    provider: str,
    model_name: str,
    batch_size: int = 200,
    page_chars: int = PAGE_CHARS,
    on_progress: Callable[[int], None] | None = None,
    max_attempts: int | None = None,
) -> Estimate:
    """Chunk and count every selected note (read-only). `selection.embedding_model` is the
    model key chunks record; `model_name` the provider's model (for the price); notes out
    of their `max_attempts` are counted apart (`out_of_attempts`)."""
    result = Estimate(model=model_name, price_per_million=price_per_million(provider, model_name))
    for note_id in await notes.unaddressable(selection):
        result.add_unchunkable(note_id, unaddressable_detail(note_id))
    bounds = await notes.id_range(selection)
    if bounds is None:
        return result
    after: Any = None
    remaining = selection.limit
    while remaining is None or remaining > 0:
        size = batch_size if remaining is None else min(batch_size, remaining)
        docs = await notes.page(
            selection,
            after=after,
            upto=bounds[1],
            limit=size,
            projection=ESTIMATE_PROJECTION,
            max_chars=page_chars,
        )
        if not docs:
            break
        after = docs[-1]["_id"]
        if remaining is not None:
            remaining -= len(docs)
        workable = docs if max_attempts is None else _workable(result, docs, max_attempts)
        await _add_page(result, workable, reuse, selection, chunker, tokenizer)
        if on_progress is not None:
            on_progress(len(docs))
    fields = {k: v for k, v in result.as_dict().items() if k not in ("reasons", "unchunkable")}
    log.info("migration.dry_run", **fields)
    return result


def _workable(
    result: Estimate, docs: list[dict[str, Any]], max_attempts: int
) -> list[dict[str, Any]]:
    """`docs` but the notes out of attempts, which `result` counts apart."""
    now = datetime.now(UTC)
    workable = [d for d in docs if not out_of_attempts(d, now, max_attempts)]
    result.out_of_attempts += len(docs) - len(workable)
    return workable


async def _add_page(
    result: Estimate,
    docs: list[dict[str, Any]],
    reuse: ReuseLookup,
    selection: Selection,
    chunker: Any,
    tokenizer: Any,
) -> None:
    """Chunk and count one page of notes into `result`.

    Duplicates are tracked per page only (a set over a huge database would not fit in
    memory): cross-page duplicates count as embedded, which errs high. Within a page a
    repeated chunk counts once, as if notes were indexed one after another; the run indexes
    `--concurrency` notes at once, so two identical notes in flight together are both
    embedded, and the run can embed a few more tokens than this says."""
    planned = await asyncio.to_thread(chunk_batch, chunker, tokenizer, docs)
    hashes = sorted({h for p in planned if not isinstance(p, Exception) for h, _ in p})
    authors = {d.get("author_id") for d in docs}
    known = await reuse.chunk_hashes(authors, selection.embedding_model, hashes)
    cached = await reuse.cached_hashes(authors, selection.embedding_model, hashes)
    seen: set[tuple[Any, str]] = set()
    for doc, chunks in zip(docs, planned, strict=True):
        result.reasons[reason(doc, selection.chunking_version, selection.embedding_model)] += 1
        if isinstance(chunks, Exception):
            result.add_unchunkable(doc["_id"], f"{type(chunks).__name__}: {chunks}")
            continue
        result.add_note(doc.get("author_id"), chunks, known=known, cached=cached, seen=seen)
