"""The chunk record every strategy returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ChunkPosition = Literal["first", "middle", "last", "only"]


@dataclass(slots=True)
class MarkdownChunk:
    """One chunk of a note.

    `start_offset`/`end_offset` are character (Python `str`) offsets into the note content;
    `content_md == note_content[start_offset:end_offset]` except for table parts after the
    first and code fragments (see `split_code`), and for `fixed_tokens` windows, which
    overlap by design. `embedding_text` is what gets embedded: the breadcrumb line
    (`section_path`, possibly shortened to fit the model's input) + a blank line + content.
    `section_index` numbers the note's sections in order (0, 1, …): the chunks of one
    section share it, so two sibling sections with the same heading path stay apart.
    `embedding` is None as chunked; `generate_embeddings` fills it (the indexing pipeline
    stores vectors itself and leaves it None).
    """

    content_md: str
    heading_path: list[str]
    chunk_type: str
    chunk_index: int
    token_count: int
    start_offset: int
    end_offset: int
    section_path: str
    total_chunks: int
    chunk_position: ChunkPosition
    content_hash: str
    embedding_text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    section_index: int = 0
    embedding: list[float] | None = None

    def to_dict(self) -> dict[str, Any]:
        """All fields as a JSON-serialisable dict (lists and dicts copied)."""
        return {
            "content_md": self.content_md,
            "heading_path": list(self.heading_path),
            "chunk_type": self.chunk_type,
            "chunk_index": self.chunk_index,
            "token_count": self.token_count,
            "start_offset": self.start_offset,
            "end_offset": self.end_offset,
            "section_path": self.section_path,
            "total_chunks": self.total_chunks,
            "chunk_position": self.chunk_position,
            "content_hash": self.content_hash,
            "embedding_text": self.embedding_text,
            "metadata": dict(self.metadata),
            "section_index": self.section_index,
            "embedding": None if self.embedding is None else list(self.embedding),
        }
