"""Tests for markdown chunking service."""

import pytest
from api.services.chunking import MarkdownChunker, MarkdownChunk


class TestMarkdownChunker:
    """Test suite for MarkdownChunker."""

    def test_simple_heading_split(self):
        """Test basic heading-based splitting."""
        chunker = MarkdownChunker(max_chunk_tokens=500)

        content = """
## Introduction
This is the intro section.

## Methods
This is the methods section.

## Conclusion
This is the conclusion.
"""

        chunks = chunker.chunk_note(content, "Test Note")

        assert len(chunks) >= 3
        assert any("Introduction" in c.heading_path for c in chunks)
        assert any("Methods" in c.heading_path for c in chunks)
        assert any("Conclusion" in c.heading_path for c in chunks)

    def test_code_block_preservation(self):
        """Test that code blocks stay together."""
        chunker = MarkdownChunker(max_chunk_tokens=100)

        content = """
## Code Example

```python
def hello():
    print("world")
    return True
```

This is after the code.
"""

        chunks = chunker.chunk_note(content, "Code Test")

        # Verify code block appears in one chunk
        code_chunks = [c for c in chunks if "```python" in c.content_md]
        assert len(code_chunks) >= 1
        assert "def hello():" in code_chunks[0].content_md
        assert "return True" in code_chunks[0].content_md

    def test_large_section_splitting(self):
        """Test splitting of sections that exceed max tokens."""
        chunker = MarkdownChunker(max_chunk_tokens=50)

        # Create large content (will exceed 50 tokens)
        content = """
## Large Section
""" + " ".join(["This is a test sentence."] * 50)

        chunks = chunker.chunk_note(content, "Large Test")

        # Should split into multiple chunks
        assert len(chunks) > 1

        # All chunks should have same heading path
        heading_paths = [tuple(c.heading_path) for c in chunks]
        assert len(set(heading_paths)) == 1  # All same path

    def test_heading_hierarchy(self):
        """Test nested heading structure preservation."""
        chunker = MarkdownChunker(max_chunk_tokens=500)

        content = """
# Title

## Section 1

### Subsection 1.1

Content here.

### Subsection 1.2

More content.

## Section 2

Final content.
"""

        chunks = chunker.chunk_note(content, "Hierarchy Test")

        # Find subsection chunks
        subsection_chunks = [
            c for c in chunks
            if len(c.heading_path) >= 3
        ]

        assert len(subsection_chunks) >= 2
        # Verify breadcrumb paths
        assert any(
            "Section 1" in c.heading_path and "Subsection 1.1" in c.heading_path
            for c in subsection_chunks
        )

    @pytest.mark.asyncio
    async def test_embedding_generation(self):
        """Test embedding generation for chunks."""
        # Requires OPENAI_API_KEY in environment
        import os
        if not os.getenv("OPENAI_API_KEY"):
            pytest.skip("OPENAI_API_KEY not set")

        chunker = MarkdownChunker()
        content = "## Test\nThis is a test."

        chunks = chunker.chunk_note(content, "Embedding Test")
        chunks = await chunker.generate_embeddings(chunks)

        assert all(c.embedding is not None for c in chunks)
        assert all(len(c.embedding) == 1536 for c in chunks)


# Run with: pytest tests/api/test_chunking.py -v
