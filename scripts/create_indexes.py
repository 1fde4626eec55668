"""Create or update the Atlas Search indexes: `python -m scripts.create_indexes [--no-wait]
[--timeout 600]`, the same command as `autonote indexes create`."""

from __future__ import annotations

import typer

from api.cli.indexes import indexes_create


def main() -> None:
    typer.run(indexes_create)


if __name__ == "__main__":
    main()
