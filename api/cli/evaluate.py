"""`autonote eval run` and `autonote eval optimize-chunk-size`: retrieval quality on a
labelled dataset, through the real pipeline in an isolated, throwaway database (notes
service → reconciler → `note_chunks` → local search index → retrieval service). Settings
come from the environment as the app reads them. Dataset format:
benchmarks/data/retrieval/README.md; the default is the small example set in
api/evaluation/example/."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any, get_args

import typer

from api.cli.common import settings_or_exit
from api.config import ChunkingStrategy
from api.evaluation.chunk_size import DEFAULT_SIZES, SizeResult, best_size, sweep_chunk_sizes
from api.evaluation.dataset import Dataset, DatasetError, load_dataset
from api.evaluation.harness import EvalRun, SearchConfig, eval_server, open_corpus
from api.evaluation.report import describe, pct
from api.logging import configure_logging
from api.retrieval.backends import Mode

EXAMPLE_DIR = Path(__file__).resolve().parents[1] / "evaluation" / "example"
MODES: tuple[Mode, ...] = ("hybrid", "vector", "keyword")


async def evaluate_dataset(
    dataset: Dataset, *, mongo_url: str, modes: list[Mode], limit: int, chunks_per_note: int
) -> tuple[list[EvalRun], str]:
    """Index once with the current settings and evaluate each mode; also returns a line
    describing the index."""
    async with open_corpus(dataset, mongo_url=mongo_url) as corpus:
        runs = [
            await corpus.evaluate(
                search=SearchConfig(mode=mode, limit=limit, chunks_per_note=chunks_per_note),
                label=mode,
            )
            for mode in modes
        ]
        s, r = corpus.settings, corpus.report
        info = (
            f"{r.notes} notes → {r.chunks} chunks (mean {r.mean_chunk_tokens:.0f} tokens; "
            f"{s.chunking_strategy}, CHUNKING_MAX_TOKENS={s.chunk_max_tokens}, "
            f"model {corpus.embedder.model}) indexed in {r.seconds:.1f}s"
        )
    return runs, info


def evaluate_command(
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
    mode: Annotated[
        list[str] | None, typer.Option(help="hybrid | vector | keyword (repeatable; default all)")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="Notes per search (chat asks for 6)")] = 6,
    chunks_per_note: Annotated[int, typer.Option(min=1, help="Sections per note")] = 3,
    mongodb_url: Annotated[
        str | None,
        typer.Option(
            help="Use this server (a throwaway database is created and dropped) instead of "
            "starting the embedded one in a temp dir"
        ),
    ] = None,
    dump: Annotated[
        Path | None, typer.Option(help="Write per-question ranks and citations (JSONL) here")
    ] = None,
) -> None:
    """Section-level Recall@1/3/5 and MRR@3 of search on a labelled dataset, with the
    current settings, in an isolated database (nothing of yours is touched)."""

    chosen = list(mode or MODES)
    unknown = [m for m in chosen if m not in MODES]
    if unknown:
        raise typer.BadParameter(f"unknown mode(s) {unknown}; use hybrid, vector or keyword")
    # Bad settings, a malformed dataset or a --dump nobody can write: one line, exit 2,
    # never a traceback (the --dump folder is checked before the evaluation runs).
    settings_or_exit()
    configure_logging("WARNING")
    if dump is not None and not dump.parent.is_dir():
        typer.echo(f"autonote: --dump: no folder {dump.parent}", err=True)
        raise typer.Exit(2)
    try:
        dataset = load_dataset(notes, questions)
    except DatasetError as exc:
        typer.echo(f"autonote: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{len(dataset.notes)} notes, {len(dataset.questions)} questions")
    with eval_server(mongodb_url) as url:
        runs, info = asyncio.run(
            evaluate_dataset(
                dataset,
                mongo_url=url,
                modes=[m for m in MODES if m in chosen],
                limit=limit,
                chunks_per_note=chunks_per_note,
            )
        )
    typer.echo(info)
    for run in runs:
        typer.echo(describe(run))
    if dump is not None:
        with dump.open("w", encoding="utf-8") as out:
            for run in runs:
                for row in run.rows():
                    out.write(json.dumps({"mode": run.label, **row}) + "\n")


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
