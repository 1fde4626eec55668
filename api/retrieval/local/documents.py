"""Note and chunk documents as the local index takes them."""

from __future__ import annotations

from typing import Any

from api.chunk_store.vectors import from_bson_vector
from api.notes.stored import note_tags, note_title, note_updated_at
from api.retrieval.types import ChunkRecord, NoteMeta, section_index_of


def note_meta(doc: dict[str, Any]) -> NoteMeta:
    """Search metadata of a note document."""
    return NoteMeta(
        note_id=str(doc["_id"]),
        author_id=str(doc["author_id"]),
        title=note_title(doc),
        tags=note_tags(doc),
        updated_at=note_updated_at(doc),
        indexed_version=doc.get("indexed_version"),
    )


def chunk_record(doc: dict[str, Any]) -> ChunkRecord:
    """A `note_chunks` document as the local index takes it."""
    heading_path = [str(h) for h in doc.get("heading_path") or []]
    section_path = doc.get("section_path") or " > ".join(heading_path)
    return ChunkRecord(
        chunk_id=str(doc["_id"]),
        note_id=str(doc["note_id"]),
        author_id=str(doc["author_id"]),
        note_version=int(doc["note_version"]),
        chunk_index=int(doc["chunk_index"]),
        heading_path=heading_path,
        section_index=section_index_of(doc),
        section_path=section_path,
        content_md=doc.get("content_md", ""),
        start_offset=int(doc.get("start_offset", 0)),
        end_offset=int(doc.get("end_offset", 0)),
        tags=note_tags(doc),
        chunk_type=doc.get("chunk_type", "text"),
        aliases=chunk_aliases(doc),
        embedding_text=f"{section_path}\n\n{doc.get('content_md', '')}",
        vector=from_bson_vector(doc["embedding"]),
    )


def chunk_aliases(doc: dict[str, Any]) -> tuple[str, ...]:
    """The note's aliases a stored chunk carries (`metadata.aliases`, strings only)."""
    metadata = doc.get("metadata")
    aliases = metadata.get("aliases") if isinstance(metadata, dict) else None
    if not isinstance(aliases, list):
        return ()
    return tuple(a for a in aliases if isinstance(a, str))
