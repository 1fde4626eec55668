"""The original design's regex chunker, kept as the benchmark baseline.

This is the algorithm the original design specified (its `api/services/chunking.py`)
reproduced faithfully — including its known defects, which
the benchmark is meant to expose — with only the embedding call, logging and tracing removed:

- tokens are estimated as `len(text) // 4`;
- the note title is prepended as `# {title}` (so chunk texts are not source slices);
- only ``` fences are protected (as placeholders whose length, not the code's, is what the
  section size estimate sees); ~~~ fences, setext headings and tables are not understood;
- a large section is split on blank lines only, and its last piece is dropped when it is
  shorter than `min_chunk_tokens`.

Do not "fix" anything here: the point is to measure the original algorithm as written.
"""

from __future__ import annotations

import os
import re


class BaselineChunk:
    """One chunk as the original `MarkdownChunk` builds it."""

    def __init__(
        self, content_md: str, heading_path: list[str], chunk_type: str, chunk_index: int
    ) -> None:
        self.content_md = content_md
        self.heading_path = heading_path
        self.chunk_type = chunk_type
        self.chunk_index = chunk_index
        self.token_count = self._estimate_tokens(content_md)
        self.embedding: list[float] | None = None

    @staticmethod
    def _estimate_tokens(text: str) -> int:
        """Estimate token count (rough: 4 chars per token)."""
        return len(text) // 4

    def to_dict(self) -> dict[str, object]:
        """Convert to dictionary for MongoDB storage."""
        return {
            "content_md": self.content_md,
            "heading_path": self.heading_path,
            "chunk_type": self.chunk_type,
            "chunk_index": self.chunk_index,
            "token_count": self.token_count,
            "embedding": self.embedding,
        }


class BaselineRegexChunker:
    """The original `MarkdownChunker`, minus embeddings, logging and tracing."""

    def __init__(
        self,
        max_chunk_tokens: int | None = None,
        preserve_code_blocks: bool = True,
        min_chunk_tokens: int = 50,
    ) -> None:
        self.max_chunk_tokens = max_chunk_tokens or int(os.getenv("CHUNKING_MAX_TOKENS", "300"))
        self.preserve_code_blocks = preserve_code_blocks
        self.min_chunk_tokens = min_chunk_tokens

    def chunk_note(self, note_content: str, note_title: str) -> list[BaselineChunk]:
        """Split a note into chunks exactly as the original algorithm does."""
        full_content = f"# {note_title}\n\n{note_content}"
        content_with_placeholders, code_blocks = self._extract_code_blocks(full_content)
        sections = self._split_by_headings(content_with_placeholders)
        sections = self._restore_code_blocks(sections, code_blocks)

        chunks: list[BaselineChunk] = []
        for section in sections:
            if section["token_count"] > self.max_chunk_tokens:
                chunks.extend(
                    self._split_large_section(
                        section["content"], section["heading_path"], len(chunks)
                    )
                )
            else:
                chunks.append(
                    BaselineChunk(
                        content_md=section["content"],
                        heading_path=section["heading_path"],
                        chunk_type=section["chunk_type"],
                        chunk_index=len(chunks),
                    )
                )
        return chunks

    def _extract_code_blocks(self, content: str) -> tuple[str, dict[str, str]]:
        """Replace ``` code blocks with placeholders; return text and placeholder map."""
        code_blocks: dict[str, str] = {}
        counter = [0]

        def replace_code_block(match: re.Match[str]) -> str:
            placeholder = f"__CODE_BLOCK_{counter[0]}__"
            code_blocks[placeholder] = match.group(0)
            counter[0] += 1
            return placeholder

        pattern = r"```[\s\S]*?```"
        return re.sub(pattern, replace_code_block, content), code_blocks

    def _restore_code_blocks(self, sections: list[dict], code_blocks: dict[str, str]) -> list[dict]:
        """Put the code blocks back (sizes were already estimated on the placeholders)."""
        for section in sections:
            for placeholder, code_block in code_blocks.items():
                section["content"] = section["content"].replace(placeholder, code_block)
        return sections

    def _split_by_headings(self, content: str) -> list[dict]:
        """Split on lines matching `^#{1,6}\\s+(.+?)$`, tracking the heading stack."""
        heading_pattern = r"^(#{1,6})\s+(.+?)$"
        lines = content.split("\n")
        sections: list[dict] = []
        current_section: dict = {
            "heading_path": [],
            "content": "",
            "chunk_type": "section",
            "heading_level": 0,
        }
        heading_stack: list[tuple[int, str]] = []

        for line in lines:
            match = re.match(heading_pattern, line, re.MULTILINE)
            if match:
                if current_section["content"].strip():
                    current_section["token_count"] = len(current_section["content"]) // 4
                    sections.append(current_section.copy())
                level = len(match.group(1))
                heading_text = match.group(2).strip()
                while heading_stack and heading_stack[-1][0] >= level:
                    heading_stack.pop()
                heading_stack.append((level, heading_text))
                current_section = {
                    "heading_path": [h[1] for h in heading_stack],
                    "content": line + "\n",
                    "chunk_type": "section",
                    "heading_level": level,
                }
            else:
                current_section["content"] += line + "\n"

        if current_section["content"].strip():
            current_section["token_count"] = len(current_section["content"]) // 4
            sections.append(current_section)
        return sections

    def _split_large_section(
        self, content: str, heading_path: list[str], starting_index: int
    ) -> list[BaselineChunk]:
        """Greedy paragraph packing; the final piece is kept only if >= min_chunk_tokens."""
        paragraphs = re.split(r"\n\n+", content)
        chunks: list[BaselineChunk] = []
        current_chunk = ""
        current_index = starting_index

        for para in paragraphs:
            if not para.strip():
                continue
            test_chunk = (current_chunk + "\n\n" + para).strip()
            test_tokens = len(test_chunk) // 4
            if test_tokens > self.max_chunk_tokens and current_chunk:
                chunks.append(
                    BaselineChunk(
                        content_md=current_chunk.strip(),
                        heading_path=heading_path,
                        chunk_type="paragraph",
                        chunk_index=current_index,
                    )
                )
                current_index += 1
                current_chunk = para
            else:
                current_chunk = test_chunk

        if current_chunk.strip() and len(current_chunk) // 4 >= self.min_chunk_tokens:
            chunks.append(
                BaselineChunk(
                    content_md=current_chunk.strip(),
                    heading_path=heading_path,
                    chunk_type="paragraph",
                    chunk_index=current_index,
                )
            )
        return chunks
