"""An embedder wrapper that remembers vectors by exact input text, for evaluation runs.

An embedding is a pure function of its input text, so the cache only saves time; it is keyed
by model, dimensions, truncate flag and text. Not for production: it grows without bound.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from connectors.embeddings.base import EmbeddingBatch

log = structlog.get_logger(__name__)


class CachingEmbedder:
    """Delegates to `inner`, embedding only texts it has not seen before.

    Token counts of cache hits are reported as if embedded (the tokens the texts hold), so
    indexing statistics read the same; `hits`/`misses` tell what the cache saved.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._vectors: dict[bytes, np.ndarray] = {}
        self.hits = 0
        self.misses = 0

    def __getattr__(self, name: str) -> Any:
        # provider, model, dimensions, max_input_tokens, tokenizer...: the inner model's.
        return getattr(self.inner, name)

    def _key(self, text: str, truncate: bool) -> bytes:
        head = f"{self.inner.model}@{self.inner.dimensions}:{int(truncate)}:"
        return hashlib.blake2b((head + text).encode("utf-8"), digest_size=20).digest()

    async def embed(self, texts: list[str], *, truncate: bool = False) -> EmbeddingBatch:
        """Vectors for `texts` in input order; unseen texts are embedded in one inner call."""
        keys = [self._key(t, truncate) for t in texts]
        todo = list(dict.fromkeys(k for k in keys if k not in self._vectors))
        tokens = 0
        requests = 0
        if todo:
            first = {k: i for i, k in reversed(list(enumerate(keys)))}
            batch = await self._inner_embed([texts[first[k]] for k in todo], truncate)
            vectors = np.asarray(batch.vectors, dtype=np.float32)
            for k, vec in zip(todo, vectors, strict=True):
                self._vectors[k] = vec
            tokens, requests = int(batch.tokens), int(batch.requests)
        self.hits += len(keys) - len(todo)
        self.misses += len(todo)
        dims = int(self.inner.dimensions)
        out = (
            np.stack([self._vectors[k] for k in keys])
            if keys
            else np.empty((0, dims), dtype=np.float32)
        )
        if len(todo) < len(keys):
            tokens += self._hit_tokens(texts, keys, set(todo), truncate)
        return EmbeddingBatch(vectors=out, tokens=tokens, requests=requests)

    async def _inner_embed(self, texts: list[str], truncate: bool) -> EmbeddingBatch:
        if truncate:
            return await self.inner.embed(texts, truncate=True)
        return await self.inner.embed(texts)

    def _hit_tokens(
        self, texts: list[str], keys: list[bytes], embedded: set[bytes], truncate: bool
    ) -> int:
        tokenizer = getattr(self.inner, "tokenizer", None)
        if tokenizer is None:
            return 0
        limit = int(getattr(self.inner, "max_input_tokens", 0) or 0)
        total = 0
        for text, key in zip(texts, keys, strict=True):
            if key in embedded:
                continue
            n = int(tokenizer.count(text))
            total += min(n, limit) if truncate and limit else n
        return total

    def __len__(self) -> int:
        return len(self._vectors)

    def load(self, path: Path) -> int:
        """Add the entries saved in `path` (a missing file adds nothing); returns how many."""
        if not path.exists():
            return 0
        with np.load(path) as data:
            keys, vectors = data["keys"], data["vectors"]
        dims = int(self.inner.dimensions)
        if vectors.ndim != 2 or vectors.shape[1] != dims or keys.shape != (len(vectors), 20):
            return 0  # another model's file
        for key, vec in zip(keys, vectors, strict=True):
            self._vectors.setdefault(key.tobytes(), np.asarray(vec, dtype=np.float32))
        log.info("eval.embedding_cache_loaded", path=str(path), entries=len(keys))
        return len(keys)

    def save(self, path: Path) -> None:
        """Write every entry to `path` (atomically: a temp file, then a rename)."""
        if not self._vectors:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        # Raw digests as a uint8 matrix: numpy's fixed-width bytes type would strip a
        # digest's trailing NUL bytes.
        keys = np.frombuffer(b"".join(self._vectors), dtype=np.uint8).reshape(-1, 20)
        vectors = np.stack(list(self._vectors.values())).astype(np.float32)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.npz")
        np.savez(tmp, keys=keys, vectors=vectors)
        os.replace(tmp, path)

    async def aclose(self) -> None:
        """Close the inner embedder."""
        await self.inner.aclose()
