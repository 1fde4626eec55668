"""Measure retrieval quality on a labelled dataset: `python -m scripts.evaluate_retrieval`,
the same command as `autonote eval run` (see `--help`)."""

from __future__ import annotations

import typer

from api.cli.evaluate import evaluate_command


def main() -> None:
    typer.run(evaluate_command)


if __name__ == "__main__":
    main()
