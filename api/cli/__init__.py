"""`autonote`: every operational command in one CLI (`autonote --help`). Each command
lives in its own module and imports `api.cli.common`, never this package."""

from __future__ import annotations

import typer

from api.cli.check import check
from api.cli.evaluate import evaluate_command, optimize_command
from api.cli.export import export_notes
from api.cli.imports import import_files
from api.cli.index import index_status
from api.cli.indexes import indexes_create
from api.cli.mcp import mcp_command
from api.cli.migrate import migrate
from api.cli.serve import serve, setup_offline
from api.cli.sync import sync
from api.cli.users import users_create
from api.cli.worker import worker

app = typer.Typer(
    name="autonote",
    help="Autonote: markdown notes with heading-aware chunks, hybrid search and cited chat.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
)
users_app = typer.Typer(help="Manage users and API keys.", no_args_is_help=True)
indexes_app = typer.Typer(help="Manage the Atlas Search indexes.", no_args_is_help=True)
index_app = typer.Typer(
    help="The search index: progress of re-indexing into a new chunker or model.",
    no_args_is_help=True,
)
eval_app = typer.Typer(
    help="Measure retrieval quality (Recall@k, MRR) on a labelled dataset.", no_args_is_help=True
)
app.add_typer(users_app, name="users")
app.add_typer(indexes_app, name="indexes")
app.add_typer(index_app, name="index")
app.add_typer(eval_app, name="eval")

app.command("serve")(serve)
app.command("setup-offline")(setup_offline)
app.command("worker")(worker)
app.command("import")(import_files)
app.command("sync")(sync)
app.command("export")(export_notes)
app.command("migrate")(migrate)
app.command("check")(check)
app.command("mcp")(mcp_command)
users_app.command("create")(users_create)
indexes_app.command("create")(indexes_create)
index_app.command("status")(index_status)
eval_app.command("run")(evaluate_command)
eval_app.command("optimize-chunk-size")(optimize_command)


def main() -> None:  # pragma: no cover
    app(prog_name="autonote")
