"""structlog configuration: JSON lines when stderr is not a TTY, pretty console otherwise.
Request and job ids are bound through contextvars so every line carries them."""

from __future__ import annotations

import logging
import sys

import structlog


class _HideStartupTraceback(logging.Filter):
    """A `StartupError` is reported as one `app.startup_failed` line; the traceback the
    server logs after it adds nothing (tests/test_startup.py)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "api.errors.StartupError" not in record.getMessage()


class _Stderr:
    """Whatever `sys.stderr` is when a line is written: test runners (and the CLI's test
    runner) swap it, and a logger holding an old one would write to a closed stream."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(level: str = "INFO", json: bool | None = None) -> None:
    """Configure structlog and route stdlib logging (uvicorn, pymongo) through it."""
    use_json = (not sys.stderr.isatty()) if json is None else json
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(_Stderr())  # type: ignore[arg-type]
    handler.setFormatter(formatter)
    handler.addFilter(_HideStartupTraceback())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("pymongo", "httpx", "httpcore", "openai"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
    logging.getLogger("uvicorn.access").disabled = True  # our middleware logs requests
