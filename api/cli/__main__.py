"""`python -m api.cli`: the `autonote` command."""

from api.cli import main

main()
