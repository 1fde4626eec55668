"""Find the chunk size that retrieves best on YOUR labelled notes (the roadmap's 5.4).

For each `max_chunk_tokens` value the real pipeline runs in an isolated database: notes
written through the notes service, chunked, embedded and stored by the reconciler, loaded
into the local search index and queried through the retrieval service. Each size is scored
with section-level Recall@k and MRR@3 (`api.evaluation.metrics`), and the best size is
printed (highest Recall@3, then MRR@3; ties go to the smaller size, which costs less to embed
and cites more precisely).

Dataset format (details: benchmarks/data/retrieval/README.md):
  notes.jsonl      {"id": "n1", "title": "...", "content_md": "...", "tags": ["..."]}
  questions.jsonl  {"id": "q1", "question": "...",
                    "gold": [{"note_id": "n1", "headings": ["Setup", "Install"]}]}
A gold entry names the leaf section that answers the question by its heading breadcrumb
(below the note title; `[]` = text before the first heading) and/or its `span`
[start, end) of character offsets; the loader checks every entry and reports problems
with file:line. Default: the small example set in scripts/eval_data/example/.

Sizes are in the embedding model's own tokens, and a chunk never exceeds what the model
reads (the local MiniLM reads 254 word pieces, breadcrumb included): sizes above that give
the same chunks. Sizes whose chunks are identical to a smaller size's are not re-indexed:
they are reported as equal to it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, get_args

import typer

from api.config import ChunkingStrategy, Settings
from api.evaluation.dataset import Dataset, load_dataset
from api.evaluation.harness import (
    SearchConfig,
    default_embedder,
    eval_server,
    eval_settings,
    open_corpus,
)
from api.evaluation.metrics import Metrics, QuestionOutcome
from api.evaluation.report import pct
from api.providers import build_chunker
from api.retrieval.backends import Mode

EXAMPLE_DIR = Path(__file__).resolve().parent / "eval_data" / "example"
DEFAULT_SIZES: tuple[int, ...] = (100, 200, 300, 400, 500, 600, 800)


@dataclass(frozen=True, slots=True)
class SizeResult:
    """One chunk size's outcome; `same_as` names the smaller size with identical chunks."""

    size: int
    chunks: int
    mean_chunk_tokens: float
    metrics: Metrics
    outcomes: tuple[QuestionOutcome, ...] = field(repr=False, default=())
    same_as: int | None = None


def _fingerprint(dataset: Dataset, chunker: Any) -> str:
    """A hash of every chunk span and breadcrumb the chunker makes for the dataset."""
    digest = hashlib.blake2b(digest_size=16)
    for note in dataset.notes.values():
        for c in chunker.chunk_note(note.content_md, note.title):
            digest.update(f"{note.id}|{c.start_offset}|{c.end_offset}|{c.section_path}\n".encode())
    return digest.hexdigest()


def size_overrides(size: int, base: Settings, strategy: str) -> dict[str, Any]:
    """Settings overrides for one size (the minimum chunk size is lowered when needed)."""
    min_tokens = base.chunking_min_tokens if base.chunking_min_tokens < size else size // 2
    return {
        "chunking_strategy": strategy,
        "chunking_max_tokens": size,
        "chunking_min_tokens": min_tokens,
    }


async def sweep_chunk_sizes(
    dataset: Dataset,
    sizes: list[int],
    *,
    mongo_url: str,
    search: SearchConfig | None = None,
    strategy: str = "hierarchical_markdown",
    base_overrides: dict[str, Any] | None = None,
    embedder: Any | None = None,
) -> list[SizeResult]:
    """Index and evaluate `dataset` once per distinct chunking among `sizes` (ascending)."""
    search = search or SearchConfig()
    base_overrides = dict(base_overrides or {})
    own = embedder is None
    probe = eval_settings(mongo_url, "probe", Path("."), base_overrides)
    embedder = embedder or default_embedder(probe)
    results: list[SizeResult] = []
    seen: dict[str, SizeResult] = {}
    try:
        for size in sorted(set(sizes)):
            overrides = {**base_overrides, **size_overrides(size, probe, strategy)}
            chunker = build_chunker(
                eval_settings(mongo_url, "probe", Path("."), overrides), embedder
            )
            key = _fingerprint(dataset, chunker)
            if key in seen:
                first = seen[key]
                results.append(
                    SizeResult(
                        size,
                        first.chunks,
                        first.mean_chunk_tokens,
                        first.metrics,
                        first.outcomes,
                        same_as=first.same_as or first.size,
                    )
                )
                continue
            async with open_corpus(
                dataset, mongo_url=mongo_url, settings_overrides=overrides, embedder=embedder
            ) as corpus:
                run = await corpus.evaluate(search=search, label=f"max_chunk_tokens={size}")
                result = SizeResult(
                    size,
                    corpus.report.chunks,
                    corpus.report.mean_chunk_tokens,
                    run.metrics,
                    run.outcomes,
                )
            seen[key] = result
            results.append(result)
    finally:
        if own:
            await embedder.aclose()
    return results


def best_size(results: list[SizeResult]) -> SizeResult:
    """Highest Recall@3, then MRR@3; ties → the smaller size."""
    return max(results, key=lambda r: (r.metrics.recall[3], r.metrics.mrr3, -r.size))


def _print_table(results: list[SizeResult], best: SizeResult) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Section-level retrieval by max_chunk_tokens")
    for header in ("size", "chunks", "mean tokens", "R@1", "R@3", "R@5", "MRR@3", "note R@3"):
        table.add_column(header, justify="right")
    for r in results:
        m = r.metrics
        table.add_row(
            f"{r.size}{' *' if r.size == best.size else ''}",
            str(r.chunks) + (f" (= {r.same_as})" if r.same_as else ""),
            f"{r.mean_chunk_tokens:.0f}",
            pct(m.recall[1]),
            pct(m.recall[3]),
            pct(m.recall[5]),
            pct(m.mrr3),
            pct(m.note_recall[3]),
        )
    Console().print(table)


def optimize_command(
    sizes: Annotated[
        list[int] | None,
        typer.Argument(
            help="max_chunk_tokens values to try (default: 100 200 300 400 500 600 800)"
        ),
    ] = None,
    notes: Annotated[
        Path,
        typer.Option(
            exists=True,
            dir_okay=False,
            help="notes.jsonl (see benchmarks/data/retrieval/README.md)",
        ),
    ] = EXAMPLE_DIR / "notes.jsonl",
    questions: Annotated[
        Path,
        typer.Option(
            exists=True, dir_okay=False, help="questions.jsonl with gold sections or spans"
        ),
    ] = EXAMPLE_DIR / "questions.jsonl",
    mode: Annotated[str, typer.Option(help="hybrid | vector | keyword")] = "hybrid",
    strategy: Annotated[
        str, typer.Option(help="hierarchical_markdown | fixed_tokens | whole_note")
    ] = "hierarchical_markdown",
    mongodb_url: Annotated[
        str | None,
        typer.Option(
            help="Use this server (a throwaway database is created and dropped) "
            "instead of starting the embedded one in a temp dir"
        ),
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write results here")] = None,
) -> None:
    """Try several chunk sizes on a labelled dataset through the real pipeline (isolated
    database) and print section-level Recall@1/3/5, MRR@3 per size and the best size
    (highest Recall@3, then MRR@3; ties go to the smaller size).

    Dataset format (full description: benchmarks/data/retrieval/README.md):
    notes.jsonl, one note per line: {"id": "n1", "title": "...", "content_md": "...",
    "tags": []}; questions.jsonl, one question per line: {"id": "q1", "question": "...",
    "gold": [{"note_id": "n1", "headings": ["Setup", "Install"]}]}. `headings` is the
    breadcrumb of the section that answers (below the note title; [] = text before the
    first heading); `span` [start, end) offsets may be given instead or as well.

    Sizes are in the embedding model's tokens and a chunk never exceeds what the model
    reads: with the local model (254 word pieces) sizes above ~250 make the same chunks and
    are reported as equal to the smallest such size. The embedding model and other settings
    come from the environment like the app's (OPENAI_API_KEY → OpenAI, else local).
    """
    from api.logging import configure_logging

    if mode not in ("hybrid", "vector", "keyword"):
        raise typer.BadParameter("mode must be hybrid, vector or keyword")
    if strategy not in get_args(ChunkingStrategy):
        raise typer.BadParameter(
            f"--strategy must be one of {', '.join(get_args(ChunkingStrategy))}, not {strategy!r}"
        )
    chosen = list(sizes or DEFAULT_SIZES)
    out_of_range = [s for s in chosen if not 16 <= s <= 8191]
    if out_of_range:
        raise typer.BadParameter(f"sizes must be from 16 to 8191 tokens: {out_of_range}")
    configure_logging("WARNING")
    dataset = load_dataset(notes, questions)
    typer.echo(
        f"{len(dataset.notes)} notes, {len(dataset.questions)} questions; "
        f"sizes {chosen}; mode {mode}; strategy {strategy}"
    )
    search = SearchConfig(mode=_mode(mode))
    with eval_server(mongodb_url) as url:
        results = asyncio.run(
            sweep_chunk_sizes(dataset, chosen, mongo_url=url, search=search, strategy=strategy)
        )
    best = best_size(results)
    _print_table(results, best)
    typer.echo(
        f"Best chunk size: {best.size} tokens (Recall@3 {pct(best.metrics.recall[3])}, "
        f"MRR@3 {pct(best.metrics.mrr3)}). Set CHUNKING_MAX_TOKENS={best.size}."
    )
    if json_out is not None:
        json_out.write_text(json.dumps([_as_json(r) for r in results], indent=2) + "\n")


def _mode(value: str) -> Mode:
    if value == "vector":
        return "vector"
    if value == "keyword":
        return "keyword"
    return "hybrid"


def _as_json(r: SizeResult) -> dict[str, Any]:
    m = r.metrics
    return {
        "size": r.size,
        "same_as": r.same_as,
        "chunks": r.chunks,
        "mean_chunk_tokens": round(r.mean_chunk_tokens, 1),
        "recall": {str(k): round(v, 4) for k, v in m.recall.items()},
        "mrr3": round(m.mrr3, 4),
        "note_recall3": round(m.note_recall[3], 4),
        "questions": m.questions,
    }


def main() -> None:
    typer.run(optimize_command)


if __name__ == "__main__":
    main()
