"""Find the chunk size that retrieves best on your labelled notes:
`python -m scripts.optimize_chunk_size`, the same command as `autonote eval
optimize-chunk-size` (see `--help`)."""

from __future__ import annotations

import typer

from api.cli.evaluate import optimize_command


def main() -> None:
    typer.run(optimize_command)


if __name__ == "__main__":
    main()
