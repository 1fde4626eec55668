"""Performance tests for chunking system."""

import pytest
import time
from api.services.chunking import MarkdownChunker


class TestChunkingPerformance:
    """Performance benchmarks for chunking."""

    def test_chunking_speed(self):
        """Benchmark chunking speed for various note sizes."""
        chunker = MarkdownChunker()

        sizes = [100, 500, 1000, 5000, 10000]  # lines
        results = {}

        for size in sizes:
            # Generate test content
            content = "\n".join([
                f"## Section {i}\nThis is test content."
                for i in range(size)
            ])

            # Measure time
            start = time.time()
            chunks = chunker.chunk_note(content, "Performance Test")
            elapsed = time.time() - start

            results[size] = {
                "time_seconds": elapsed,
                "chunks_created": len(chunks),
                "lines_per_second": size / elapsed,
            }

        # Print results
        print("\nChunking Performance Results:")
        for size, metrics in results.items():
            print(f"{size} lines: {metrics['time_seconds']:.3f}s "
                  f"({metrics['lines_per_second']:.0f} lines/sec) "
                  f"-> {metrics['chunks_created']} chunks")

        # Assert reasonable performance
        # Should handle 1000 lines in < 1 second
        assert results[1000]["time_seconds"] < 1.0

    @pytest.mark.asyncio
    async def test_embedding_generation_speed(self, openai_api_key):
        """Benchmark embedding generation speed."""
        if not openai_api_key:
            pytest.skip("OPENAI_API_KEY not set")

        chunker = MarkdownChunker()
        content = "\n".join([
            f"## Section {i}\nTest content for section {i}."
            for i in range(10)
        ])

        chunks = chunker.chunk_note(content, "Embedding Speed Test")

        start = time.time()
        chunks = await chunker.generate_embeddings(chunks, openai_api_key)
        elapsed = time.time() - start

        embeddings_per_second = len(chunks) / elapsed

        print(f"\nEmbedding Generation: {len(chunks)} chunks in {elapsed:.2f}s "
              f"({embeddings_per_second:.1f} chunks/sec)")

        # Should generate at least 1 embedding per second
        assert embeddings_per_second > 1.0


# Run with: pytest tests/performance/test_chunking_performance.py -v -s
