"""Backfill chunks and embeddings for existing notes: `python -m scripts.migrate_notes_to_chunks`.

The same command as `autonote migrate` (see `--help`); the logic lives in `api.migration`.
"""

from __future__ import annotations

import typer

from api.cli.migrate import migrate


def main() -> None:
    """Run the migration command with this process's arguments."""
    typer.run(migrate)


if __name__ == "__main__":
    main()
