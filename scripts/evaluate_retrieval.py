"""Measure retrieval quality on a labelled dataset with the current settings.

`python -m scripts.evaluate_retrieval` (also `autonote eval run`): the dataset's notes go
through the real pipeline (notes service → reconciler: chunker → embedder → `note_chunks`
→ local search index → retrieval service) in an isolated, throwaway database, then every
question is searched and scored with section-level Recall@k / MRR@3
(`api.evaluation.metrics`). Chunking and embedding settings come from the environment /
`.env` exactly as the app reads them (CHUNKING_STRATEGY, CHUNKING_MAX_TOKENS,
EMBEDDING_PROVIDER, OPENAI_API_KEY, ...). The dataset format is documented in
benchmarks/data/retrieval/README.md; the default is the small example set.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer

from api.evaluation.dataset import Dataset, load_dataset
from api.evaluation.harness import EvalRun, SearchConfig, eval_server, open_corpus
from api.evaluation.report import describe
from api.retrieval.backends import Mode

EXAMPLE_DIR = Path(__file__).resolve().parent / "eval_data" / "example"
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
    from api.logging import configure_logging

    chosen = list(mode or MODES)
    unknown = [m for m in chosen if m not in MODES]
    if unknown:
        raise typer.BadParameter(f"unknown mode(s) {unknown}; use hybrid, vector or keyword")
    from api.cli import settings_or_exit
    from api.evaluation.dataset import DatasetError

    # Bad settings, a malformed dataset or a --dump nobody can write were tracebacks (the
    # last one after the whole evaluation had run; found by review): one line, exit 2.
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


def main() -> None:
    typer.run(evaluate_command)


if __name__ == "__main__":
    main()
