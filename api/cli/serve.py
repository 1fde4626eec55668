"""`autonote serve` and `autonote setup-offline`."""

from __future__ import annotations

from typing import Annotated

import typer

from api.cli.common import settings_or_exit
from api.cli.index import YesOption, reindex_gate


def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (AUTONOTE_HOST)")] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="Port (AUTONOTE_PORT)")] = None,
    yes: YesOption = False,
) -> None:
    """Serve the REST API. With no MONGODB_URL it starts the embedded database in
    AUTONOTE_DATA_DIR; with no OPENAI_API_KEY it embeds with the local ONNX model. When the
    chunker or embedding model changed, it says what re-indexing will cost and asks first
    on a terminal; without one it refuses to start unless --yes."""
    import os

    import structlog
    import uvicorn

    # The app loads its settings itself: the flags reach it (and its messages) as the
    # variables they stand for, validated like them.
    if host is not None:
        os.environ["AUTONOTE_HOST"] = host
    if port is not None:
        os.environ["AUTONOTE_PORT"] = str(port)
    settings = settings_or_exit()
    if settings.autonote_metrics_token is None and not _loopback(settings.autonote_host):
        structlog.get_logger("autonote.serve").warning(
            "metrics.unprotected",
            host=settings.autonote_host,
            detail="/metrics is readable by anyone who reaches the port; its counters show "
            "other users' activity: set AUTONOTE_METRICS_TOKEN",
        )
    from api.app import create_app

    gate = reindex_gate("serve", assume_yes=yes)
    uvicorn.run(
        lambda: create_app(settings, reindex_gate=gate),
        factory=True,
        log_config=None,
        host=settings.autonote_host,
        port=settings.autonote_port,
        proxy_headers=bool(settings.autonote_trusted_proxies),
        forwarded_allow_ips=settings.autonote_trusted_proxies or None,
        timeout_graceful_shutdown=20,
    )


def _loopback(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def setup_offline() -> None:
    """Seed tiktoken's cache from the installed package so nothing downloads at run time."""
    from api.tokenizer.offline import seed_tiktoken_cache

    path = seed_tiktoken_cache()
    typer.echo(f"tiktoken vocabularies ready in {path}")
