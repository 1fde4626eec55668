"""The integrity rules, as pure functions over one note document and its chunk documents.

No I/O here: the checker streams documents from MongoDB and feeds them in, the tests feed
hand-made documents. Each rule returns `Finding`s that also say how `--repair` fixes them
(re-queue the note through the reconciler, delete chunks, or both), so the repair step never
has to re-derive why something is wrong.

A note is "being indexed right now" while its `index_status` is `pending` or `indexing`: a
worker may be writing a new version's chunks or evicting old ones, so chunks outside the
indexed version are not orphans yet.

While a new chunker or model is built (a new *generation*), a note re-indexed into it keeps
the version its older generation's readers still see (`served`): those chunks are neither
orphans nor bad vectors (they are another model's), until the note's user switches.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from bson import ObjectId
from bson.binary import Binary

from api.indexing.generation import indexed_pin, note_generation, served_pin
from api.migration.selection import unaddressable_detail
from api.notes.stored import note_content, note_status
from api.notes.versioning import whole_version
from api.providers import model_dimensions

Kind = Literal[
    "index_behind",  # indexed, but indexed_version != version
    "not_queued",  # active note neither indexed nor queued (legacy, unknown status)
    "failed",  # indexing gave up: listed, not an integrity violation
    "chunk_count",  # chunk_count != chunks of indexed_version
    "orphan_chunks",  # note missing / trashed after convergence / other version
    "duplicate_chunks",  # same (note_id, generation, note_version, chunk_index) more than once
    "bad_vector",  # not a float32 BSON vector of the model's dimensions, or wrong model
    "bad_offsets",  # offsets outside the note
    "content_mismatch",  # content_md != note.content_md[start:end]
    "author_mismatch",  # chunk.author_id != note.author_id (isolation)
    "unaddressable",  # legacy `_id` that is not an ObjectId: never indexed, never served
]
# Kinds that are reported but are not integrity violations (exit code stays 0).
INFO_KINDS: frozenset[str] = frozenset({"failed", "unaddressable"})
ALL_KINDS: tuple[str, ...] = Kind.__args__  # type: ignore[attr-defined]
QUEUED = ("pending", "indexing")
_FLOAT32_HEADER = b"\x27\x00"


@dataclass(frozen=True, slots=True)
class Expectations:
    """What the configured deployment expects of every indexed note."""

    model_key: str  # `embedding_model_key(embedder)`, e.g. "text-embedding-3-small@1536"
    dimensions: int
    chunking_enabled: bool = True


@dataclass(frozen=True, slots=True)
class Item:
    """One thing wrong: with a chunk (`chunk_id`) or with the note itself (None)."""

    detail: str
    chunk_id: Any
    delete: bool
    requeue: bool


@dataclass(frozen=True, slots=True)
class Finding:
    """One kind of problem with one note (or with the chunks of a missing note), and what
    `--repair` does about it."""

    kind: Kind
    note_id: Any
    detail: str
    chunks: int = 0  # chunks affected (0 for note-level findings)
    delete_ids: tuple[Any, ...] = ()  # chunks the repair deletes
    requeue: bool = True  # the repair re-queues the note (fresh attempts)
    delete_note_chunks: bool = False  # the note is gone: the repair deletes all its chunks
    items: tuple[Item, ...] = ()  # what the finding merges (empty for a missing note)

    @classmethod
    def of(cls, kind: Kind, note_id: Any, items: list[Item]) -> Finding:
        """One finding from the items of one kind (summarised in `detail`)."""
        first = items[0].detail
        return cls(
            kind,
            note_id,
            first if len(items) == 1 else f"{first} (+{len(items) - 1} more)",
            chunks=sum(1 for i in items if i.chunk_id is not None),
            delete_ids=tuple(i.chunk_id for i in items if i.delete),
            requeue=any(i.requeue for i in items),
            items=tuple(items),
        )

    @property
    def is_violation(self) -> bool:
        return self.kind not in INFO_KINDS


@dataclass(slots=True)
class _Acc:
    """Findings of one note, merged per kind (one finding per kind and note)."""

    note_id: Any
    by_kind: dict[str, list[Item]] = field(default_factory=dict)

    def add(
        self,
        kind: Kind,
        detail: str,
        chunk_id: Any = None,
        *,
        delete: bool = False,
        requeue: bool = True,
    ) -> None:
        self.by_kind.setdefault(kind, []).append(Item(detail, chunk_id, delete, requeue))

    def findings(self) -> list[Finding]:
        return [
            Finding.of(kind, self.note_id, items)  # type: ignore[arg-type]
            for kind, items in self.by_kind.items()
        ]


def persistent(earlier: list[Finding], later: list[Finding]) -> list[Finding]:
    """What `later` found that `earlier` had found too: the same kind for the same note and,
    for chunk problems, the same chunks. A live database shows passing states (a version
    evicted a moment after its successor committed, a note edited between two reads) that
    never involve the same chunks twice, while a real problem stays put."""
    before: dict[tuple[str, Any], set[Any]] = {}
    for f in earlier:
        ids = before.setdefault((f.kind, f.note_id), set())
        ids.update(i.chunk_id for i in f.items if i.chunk_id is not None)
    out: list[Finding] = []
    for f in later:
        ids = before.get((f.kind, f.note_id))
        if ids is None:
            continue
        if not f.items:  # a missing note's chunks: the note is still missing
            out.append(f)
            continue
        kept = [i for i in f.items if i.chunk_id is None or i.chunk_id in ids]
        if kept == list(f.items):
            out.append(f)
        elif kept:
            out.append(Finding.of(f.kind, f.note_id, kept))
    return out


def vector_problem(value: Any, dimensions: int) -> str | None:
    """Why `value` is not a finite float32 BSON vector of `dimensions`, or None if it is."""
    if not isinstance(value, Binary) or value.subtype != 9:
        kind = type(value).__name__ if not isinstance(value, Binary) else f"subtype {value.subtype}"
        return f"not a BSON binary vector ({kind})"
    raw = bytes(value)
    if raw[:2] != _FLOAT32_HEADER:
        return f"not float32 (dtype byte 0x{raw[:1].hex() or '??'})"
    n, rest = divmod(len(raw) - 2, 4)
    if rest or n != dimensions:
        return f"{n} dimensions, expected {dimensions}"
    import numpy as np

    values = np.frombuffer(raw, dtype="<f4", offset=2)
    if not np.isfinite(values).all():
        return "contains NaN or infinity"
    if not math.isfinite(float(np.dot(values, values))) or not values.any():
        return "zero or overflowing vector"
    return None


def content_exempt(chunk: dict[str, Any]) -> bool:
    """Table parts and re-fenced code fragments carry rebuilt content, not a plain slice."""
    meta = chunk.get("metadata") or {}
    return chunk.get("chunk_type") == "table" or (
        chunk.get("chunk_type") == "code" and "code_part" in meta
    )


def _offsets_problem(chunk: dict[str, Any], content: str) -> str | None:
    start, end = chunk.get("start_offset"), chunk.get("end_offset")
    if not isinstance(start, int) or not isinstance(end, int):
        return f"offsets missing or not integers ({start!r}, {end!r})"
    if not 0 <= start <= end <= len(content):
        return f"offsets [{start}, {end}) outside the note (length {len(content)})"
    return None


def _content_problem(chunk: dict[str, Any], content: str) -> str | None:
    source = content[chunk["start_offset"] : chunk["end_offset"]]
    text = chunk.get("content_md")
    if not isinstance(text, str):
        return "content_md missing"
    meta = chunk.get("metadata") or {}
    if content_exempt(chunk):
        # Rebuilt content still holds its own span: the repeated table header comes first,
        # a code fragment adds fences around its lines.
        if meta.get("header_repeated") and not text.endswith(source):
            return "table part does not end with its source span"
        if "code_part" in meta and text != source and source.strip() not in text:
            return "code fragment does not contain its source lines"
        return None
    if text != source:
        return f"content_md differs from the note's text at [{chunk['start_offset']}, " + (
            f"{chunk['end_offset']})"
        )
    return None


def _pin(note: dict[str, Any], chunk: dict[str, Any]) -> tuple[Any, Any]:
    """(generation, version) of a chunk; one written before chunks carried a generation is
    of its note's."""
    generation = chunk.get("generation")
    if generation is None:
        generation = note_generation(note)
    return generation, chunk.get("note_version")


def _duplicates(note: dict[str, Any], chunks: list[dict[str, Any]], acc: _Acc) -> set[Any]:
    """Extra copies of a (generation, version, index): keep the lowest _id, flag the rest."""
    seen: set[tuple[Any, Any, Any]] = set()
    extra: set[Any] = set()
    for c in sorted(chunks, key=lambda d: id_sort_key(d.get("_id"))):
        key = (*_pin(note, c), c.get("chunk_index"))
        if key in seen:
            extra.add(c["_id"])
            detail = f"version {key[1]} chunk {key[2]} stored more than once"
            acc.add("duplicate_chunks", detail, c["_id"], delete=True)
        else:
            seen.add(key)
    return extra


def _note_state(note: dict[str, Any], expect: Expectations, acc: _Acc) -> None:
    status = note.get("index_status")
    version = whole_version(note.get("version"))
    if status == "failed":
        error = str(note.get("index_error") or "no error recorded")[:200]
        acc.add("failed", f"indexing failed: {error}", requeue=False)
    elif status == "indexed":
        indexed = note.get("indexed_version")
        if indexed != version:
            acc.add("index_behind", f"indexed_version {indexed} but version {version}")
        elif note.get("embedding_model") != expect.model_key:
            model = note.get("embedding_model")
            acc.add("bad_vector", f"indexed with {model!r}, configured {expect.model_key!r}")
    elif status not in QUEUED and not (status == "disabled" and not expect.chunking_enabled):
        acc.add("not_queued", f"index_status {status!r}: neither indexed nor queued")


def _chunk_problems(
    note: dict[str, Any], chunk: dict[str, Any], expect: Expectations, acc: _Acc
) -> None:
    """Rules for one chunk of the indexed version. A bad chunk is deleted and the note
    re-queued: the reconciler then rebuilds the missing chunk (its no-op shortcut only
    applies when every expected chunk is present)."""
    cid = chunk["_id"]
    if chunk.get("author_id") != note.get("author_id"):
        detail = (
            f"chunk {cid} has author_id {chunk.get('author_id')}, "
            f"the note's author is {note.get('author_id')}"
        )
        acc.add("author_mismatch", detail, cid, delete=True)
    model = chunk.get("embedding_model")
    if model != note.get("embedding_model"):
        detail = f"chunk {cid} embedded with {model!r}, note says {note.get('embedding_model')!r}"
        acc.add("bad_vector", detail, cid, delete=True)
    else:
        dims = expect.dimensions if model == expect.model_key else model_dimensions(model)
        problem = vector_problem(chunk.get("embedding"), dims) if dims else "unknown dimensions"
        if problem:
            acc.add("bad_vector", f"chunk {cid}: {problem}", cid, delete=True)
    if chunk.get("note_version") != whole_version(note.get("version")):
        # The note was edited since: its text is the next version's, these chunks still
        # (rightly) describe the indexed one until the reconciler flips.
        return
    content = note_content(note)
    problem = _offsets_problem(chunk, content)
    if problem:
        acc.add("bad_offsets", f"chunk {cid}: {problem}", cid, delete=True)
        return
    problem = _content_problem(chunk, content)
    if problem:
        acc.add("content_mismatch", f"chunk {cid}: {problem}", cid, delete=True)


def _stale_versions(
    note: dict[str, Any], chunks: list[dict[str, Any]], extra: set[Any], acc: _Acc
) -> None:
    """Chunks outside the indexed version (and the served one) of a note nobody is
    indexing: orphans."""
    indexed = note.get("indexed_version")
    version = whole_version(note.get("version"))
    status = note.get("index_status")
    kept = {indexed_pin(note), served_pin(note)}
    for c in chunks:
        if _pin(note, c) in kept or c["_id"] in extra:
            continue
        # A leftover at the note's own version is the reconciler's to replace (it deletes
        # that version before writing it): re-queue, never race it with a delete. Other
        # versions are never written again, and nobody touches a failed note: delete.
        own = c.get("note_version") == version and status != "failed"
        detail = f"chunk {c['_id']} of version {c.get('note_version')}, indexed is {indexed}"
        acc.add("orphan_chunks", detail, c["_id"], delete=not own, requeue=own)


def check_note(
    note: dict[str, Any], chunks: Iterable[dict[str, Any]], expect: Expectations
) -> list[Finding]:
    """Every rule for one existing note and all of its chunks (any version)."""
    chunks = list(chunks)
    acc = _Acc(note["_id"])
    if not isinstance(note["_id"], ObjectId):
        # Not re-queued: indexed, it would make search fail on its id. Reported only; its
        # chunks are orphans.
        acc.add("unaddressable", unaddressable_detail(note["_id"]), requeue=False)
        for c in chunks:
            acc.add(
                "orphan_chunks",
                "the note's _id is not an ObjectId",
                c["_id"],
                delete=True,
                requeue=False,
            )
        return acc.findings()
    busy = note.get("index_status") in QUEUED
    if note_status(note) != "active":
        if chunks and not busy:
            # The reconciler's removal path deletes them under its lease.
            detail = (
                f"note is {note.get('status')!r} ({note.get('index_status')!r}) and still has "
                f"{len(chunks)} chunks"
            )
            for c in chunks:
                acc.add("orphan_chunks", detail, c["_id"])
        return acc.findings()
    _note_state(note, expect, acc)
    extra = _duplicates(note, chunks, acc)
    indexed = note.get("indexed_version")
    pin = indexed_pin(note)
    current = [c for c in chunks if pin is not None and _pin(note, c) == pin]
    current = [c for c in current if c["_id"] not in extra]
    if int(note.get("chunk_count") or 0) != len(current):
        detail = (
            f"chunk_count {note.get('chunk_count')} but {len(current)} chunks of "
            f"indexed version {indexed}"
        )
        acc.add("chunk_count", detail)
    _served_count(note, chunks, extra, acc)
    for chunk in current:
        _chunk_problems(note, chunk, expect, acc)
    if not busy:
        _stale_versions(note, chunks, extra, acc)
    return acc.findings()


def _served_count(
    note: dict[str, Any], chunks: list[dict[str, Any]], extra: set[Any], acc: _Acc
) -> None:
    """The version kept for an older generation's readers must be whole: they load it only
    then. Nothing the repair can rebuild (another model's vectors): reported, and the
    user's switch ends it."""
    served = served_pin(note)
    if served is None:
        return
    held = sum(1 for c in chunks if _pin(note, c) == served and c["_id"] not in extra)
    want = int((note.get("served") or {}).get("chunk_count") or 0)
    if held != want:
        detail = f"served version {served[1]} of generation {served[0]}: {held} of {want} chunks"
        acc.add("chunk_count", detail, requeue=False)


def check_missing_note(note_id: Any, chunks: list[dict[str, Any]]) -> Finding:
    """Chunks whose note does not exist: orphans, all of them."""
    return Finding(
        "orphan_chunks",
        note_id,
        f"{len(chunks)} chunks of note {note_id}, which does not exist",
        chunks=len(chunks),
        requeue=False,
        delete_note_chunks=True,
    )


def id_sort_key(value: Any) -> tuple[int, Any]:
    """Python ordering that agrees with MongoDB's for the `_id` types in use (the checker
    merges two cursors sorted by the server)."""
    if isinstance(value, ObjectId):
        return (7, value.binary)
    if isinstance(value, str):
        return (3, value.encode("utf-8"))
    if isinstance(value, int | float):
        return (2, value)
    return (9, str(value).encode("utf-8"))
