"""Retrieval quality of chunkers on the Chroma evaluation (472 questions, 5 corpora).

Each chunker splits every corpus; its chunks and the questions are embedded with the LOCAL
embedder (all-MiniLM-L6-v2, int8 ONNX: the model family the report used); the top 5 chunks
per question by cosine similarity are scored with the report's character-range recall,
precision and IoU (see `benchmarks.chroma_eval`). Scores are given for retrieval within the
question's corpus (the acceptance protocol) and over all corpora at once (the report's
code). Target: recall ≥ 75.7 and IoU ≥ 6.5, the report's RecursiveCharacterTextSplitter
200/0 row, with 95 % bootstrap intervals and paired differences to the in-run baseline.

Chunkers: ours at 200 word pieces (the local model's tokenizer) with the shipped defaults
(pieces of a split section aimed at 2/3 of the limit, cuts where the text changes topic),
embedding `embedding_text` as indexing does: untitled (the chunk alone, as the report embeds
it: the corpora have no titles) and titled (the corpus id as the note title); the same with
nearest-boundary cuts, and revision 5's packing (aimed at the limit), as ablations; ours at
200 cl100k tokens, at 160 and 250 word pieces, and packed towards 120 and 140; the in-run
baseline RecursiveCharacterTextSplitter 200/0 with a tiktoken length function and the
Chroma repo's separators (its RecursiveTokenChunker); and fixed 200-token cl100k windows
(the report's TokenTextSplitter/FixedTokenChunker).
Embeddings are cached per chunker in benchmarks/.data/ (key includes a hash of the texts).

Reproduce: `.venv/bin/python -m benchmarks.chunk_quality` (add `--no-write` to only print).
The same evaluation with the float32 model is the investigation
`benchmarks.investigations.minilm_fp32`.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import structlog

from benchmarks.chroma_eval import Question, Span, evaluate, load_corpora, load_questions
from benchmarks.chunk_quality_report import (
    BASELINE,
    COMMAND,
    OURS,
    OURS_NEAREST,
    OURS_NEAREST_TITLED,
    OURS_R5,
    OURS_TITLED,
    SWEEP_TARGETS,
    Result,
    claims,
    render,
    size_label,
    target_label,
)
from benchmarks.common import (
    DATA_DIR,
    chroma_dir,
    code_revision,
    no_network,
    set_offline_env,
    update_claims,
    update_section,
)

log = structlog.get_logger(__name__)

CHROMA_SEPARATORS = ["\n\n", "\n", ".", "?", "!", " ", ""]

SpanMaker = Callable[[str, str], list[Span]]  # (corpus_id, corpus_text) -> spans


@dataclass(frozen=True, slots=True)
class ChunkerSpec:
    """A chunker under evaluation; `truncate` lets the embedder cut over-long inputs (as
    sentence-transformers silently does for the peers in the report)."""

    label: str
    factory: Callable[[], SpanMaker]  # built lazily: a chunker that fails to load skips alone
    truncate: bool


def locate_in_order(corpus: str, texts: list[str]) -> list[tuple[int, int]]:
    """Character ranges of chunk texts that are verbatim, in-order substrings of `corpus`."""
    out: list[tuple[int, int]] = []
    cursor = 0
    for text in texts:
        hit = corpus.find(text, cursor)
        if hit < 0:
            hit = corpus.find(text)  # an overlapping chunker may step back
        if hit < 0:
            raise ValueError(f"chunk not found in corpus: {text[:60]!r}")
        out.append((hit, hit + len(text)))
        cursor = hit + len(text)
    return out


def ours_spans(
    max_tokens: int,
    tokenizer: Any,
    max_input_tokens: int,
    target: int | None = None,
    titled: bool = True,
    cohesive: bool = True,
) -> SpanMaker:
    """Our chunker, embedding `embedding_text` as indexing does. `titled`: the corpus id
    (underscores → spaces) is the note title, which starts every chunk's embedded text;
    otherwise the title is empty and the embedded text is the chunk alone. `target` and
    `cohesive` as `MarkdownChunker`'s `target_chunk_tokens` and `cohesive_cuts`."""
    from api.chunking import MarkdownChunker

    chunker = MarkdownChunker(
        max_chunk_tokens=max_tokens,
        tokenizer=tokenizer,
        max_input_tokens=max_input_tokens,
        target_chunk_tokens=target,
        cohesive_cuts=cohesive,
    )

    def make(corpus_id: str, text: str) -> list[Span]:
        chunks = chunker.chunk_note(text, corpus_id.replace("_", " ") if titled else "")
        return [Span(c.start_offset, c.end_offset, c.embedding_text) for c in chunks]

    return make


def recursive_token_spans(chunk_size: int = 200) -> SpanMaker:
    """RecursiveCharacterTextSplitter 200/0 as the Chroma repo's RecursiveTokenChunker."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter.from_tiktoken_encoder(
        encoding_name="cl100k_base",
        chunk_size=chunk_size,
        chunk_overlap=0,
        separators=CHROMA_SEPARATORS,
        keep_separator=True,
    )

    def make(_corpus_id: str, text: str) -> list[Span]:
        texts = splitter.split_text(text)
        ranges = locate_in_order(text, texts)
        return [Span(s, e, t) for (s, e), t in zip(ranges, texts, strict=True)]

    return make


def fixed_token_spans(window: int = 200) -> SpanMaker:
    """Consecutive windows of `window` cl100k tokens (no overlap), as exact source slices."""
    from api.tokenizer.encoders import tiktoken_tokenizer

    enc = tiktoken_tokenizer("cl100k_base").encoding

    def make(_corpus_id: str, text: str) -> list[Span]:
        decoded, starts = enc.decode_with_offsets(enc.encode_ordinary(text))
        if decoded != text:
            raise ValueError("tiktoken round trip changed the corpus")
        cuts = [*starts[::window], len(text)]
        return [Span(a, b, text[a:b]) for a, b in itertools.pairwise(cuts) if b > a]

    return make


def embed_cached(embedder: Any, label: str, texts: list[str], truncate: bool) -> np.ndarray:
    """Embed `texts` once per (label, model, texts); reruns load benchmarks/.data/*.npy."""
    digest = hashlib.sha256(
        "\x00".join([embedder.model, str(truncate), *texts]).encode("utf-8")
    ).hexdigest()[:16]
    slug = "".join(ch if ch.isalnum() else "-" for ch in label.lower())
    path = DATA_DIR / f"emb-{slug}-{digest}.npy"
    if path.exists():
        return np.load(path)
    vectors = embedder.embed_sync(texts, truncate=truncate).vectors
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    log.info("chunk_quality.embedded", label=label, texts=len(texts), path=str(path))
    return vectors


def size_profile(
    spans: dict[str, list[Span]],
    corpora: dict[str, str],
    count_cl100k: Callable[[str], int],
    count_model: Callable[[str], int],
    model_limit: int,
) -> dict[str, float]:
    """Chunk count and size distribution (content in cl100k; embedded text in word pieces)."""
    flat = [(corpora[c], s) for c in spans for s in spans[c]]
    toks = [count_cl100k(text[s.start : s.end]) for text, s in flat]
    pieces = [count_model(s.embed_text) for _, s in flat]
    return {
        "chunks": len(flat),
        "mean_tokens": statistics.fmean(toks),
        "p10_tokens": float(np.percentile(toks, 10)),
        "p90_tokens": float(np.percentile(toks, 90)),
        "small_share": sum(t < 50 for t in toks) / len(toks),
        "mean_pieces": statistics.fmean(pieces),
        "over_model_limit": sum(p > model_limit for p in pieces),
    }


def evaluate_chunker(
    spec: ChunkerSpec,
    corpora: dict[str, str],
    questions: list[Question],
    question_vecs: np.ndarray,
    embedder: Any,
    count_cl100k: Callable[[str], int],
    k: int = 5,
) -> Result:
    """Chunk every corpus, embed (cached), retrieve and score in both scopes."""
    make_spans = spec.factory()
    spans = {cid: make_spans(cid, text) for cid, text in corpora.items()}
    for cid, corpus_spans in spans.items():
        if any(not 0 <= s.start < s.end <= len(corpora[cid]) for s in corpus_spans):
            raise ValueError(f"{spec.label}: chunk range outside corpus {cid}")
    sizes = size_profile(
        spans, corpora, count_cl100k, embedder.tokenizer.count, embedder.max_input_tokens
    )
    # Ours must never need truncation; if it does, measure anyway and let the report say so.
    truncate = spec.truncate or sizes["over_model_limit"] > 0
    flat_texts = [s.embed_text for cid in spans for s in spans[cid]]
    vectors = embed_cached(embedder, spec.label, flat_texts, truncate)
    span_vecs: dict[str, np.ndarray] = {}
    offset = 0
    for cid, corpus_spans in spans.items():
        span_vecs[cid] = vectors[offset : offset + len(corpus_spans)]
        offset += len(corpus_spans)
    return Result(
        spec.label,
        evaluate(questions, question_vecs, spans, span_vecs, k=k, scope="corpus"),
        evaluate(questions, question_vecs, spans, span_vecs, k=k, scope="global"),
        sizes,
    )


# The float32 run is slow (numpy BERT): only the acceptance rows, the cut ablation and the
# in-run baseline.
FP32_LABELS = frozenset({OURS, OURS_TITLED, OURS_NEAREST, OURS_NEAREST_TITLED, BASELINE})


def default_specs(embedder: Any) -> list[ChunkerSpec]:
    """The chunkers evaluated, ours first (shipped defaults, then ablations)."""
    from api.tokenizer import tiktoken_tokenizer

    local, limit = embedder.tokenizer, embedder.max_input_tokens
    cl100k = tiktoken_tokenizer("cl100k_base")

    def ours(label: str, size: int = 200, truncate: bool = False, **kw: Any) -> ChunkerSpec:
        tokenizer = kw.pop("tokenizer", local)
        return ChunkerSpec(label, lambda: ours_spans(size, tokenizer, limit, **kw), truncate)

    return [
        ours(OURS, titled=False),
        ours(OURS_TITLED, titled=True),
        ours(OURS_NEAREST, titled=False, cohesive=False),
        ours(OURS_NEAREST_TITLED, titled=True, cohesive=False),
        # Revision 5's default: pieces aimed at the limit, nearest-boundary cuts.
        ours(OURS_R5, titled=False, target=200, cohesive=False),
        ours("ours 200 (cl100k tokens), untitled", truncate=True, tokenizer=cl100k, titled=False),
        *(ours(size_label(size), size, titled=False) for size in (160, 250)),
        *(ours(target_label(t), titled=False, target=t) for t in SWEEP_TARGETS),
        ChunkerSpec(BASELINE, recursive_token_spans, True),
        ChunkerSpec("fixed 200-token cl100k windows (in-run)", fixed_token_spans, True),
    ]


def main(argv: list[str] | None = None, *, fp32: Callable[[], Any] | None = None) -> None:
    """Run every chunker, print the report and (unless --no-write) update the area page and
    the claim. `fp32` builds the float32 model instead of the local one, for the acceptance
    rows and the in-run baseline only (the investigation's report, no claim)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, default=5, help="chunks retrieved per question")
    parser.add_argument("--only", default="", help="run chunkers whose label contains this")
    parser.add_argument("--no-write", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)

    set_offline_env()
    revision = code_revision("api/chunking", "api/tokenizer")  # what gets imported below
    from api.tokenizer.encoders import tiktoken_tokenizer
    from connectors.embeddings.local import LocalEmbedder

    data = chroma_dir()
    corpora = load_corpora(data / "corpora")
    questions = load_questions(data / "questions_df.csv", corpora)
    with no_network() as attempts:
        embedder = fp32() if fp32 else LocalEmbedder()
        count = tiktoken_tokenizer("cl100k_base").count
        qvecs = embed_cached(embedder, "questions", [q.text for q in questions], True)
        results = []
        for spec in default_specs(embedder):
            if args.only and args.only not in spec.label:
                continue
            if fp32 and spec.label not in FP32_LABELS:
                continue
            results.append(
                evaluate_chunker(spec, corpora, questions, qvecs, embedder, count, k=args.k)
            )
            done = results[-1]
            print(
                f"{spec.label}: recall {100 * done.corpus.recall:.1f} "
                f"IoU {100 * done.corpus.iou:.1f} (own corpus), "
                f"{100 * done.global_.recall:.1f} / {100 * done.global_.iou:.1f} (all corpora)",
                flush=True,
            )
    report = render(results, len(questions), args.k, attempts, revision, fp32=fp32 is not None)
    print(report)
    if args.no_write:
        return
    if fp32:
        update_section("chunk_quality_fp32", report)
    else:
        update_section("chunk_quality", report)
        update_claims(claims(results), COMMAND)


if __name__ == "__main__":
    main()
