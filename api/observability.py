"""OpenTelemetry: tracer, meter and the instruments operators rely on (docs/operations.md).

Instruments are created from the API's proxy meter, so they are no-ops until
`setup_telemetry()` installs an SDK MeterProvider (a Prometheus reader for `/metrics`, and an
OTLP exporter when `OTEL_EXPORTER_OTLP_ENDPOINT` is set). Database calls get spans through a
PyMongo command listener; HTTP requests through the request middleware.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics, trace
from pymongo import monitoring

tracer = trace.get_tracer("autonote")
meter = metrics.get_meter("autonote")

# Names follow the original design (`chunks.created`, `chunk.search.duration`).
chunks_created = meter.create_counter(
    "chunks.created", unit="{chunk}", description="Chunks written to note_chunks"
)
chunks_embedded = meter.create_counter(
    "chunks.embedded", unit="{chunk}", description="Chunks whose embedding was computed"
)
chunks_reused = meter.create_counter(
    "chunks.reused", unit="{chunk}", description="Chunks whose embedding was reused (unchanged)"
)
embedding_tokens = meter.create_counter(
    "embedding.tokens", unit="{token}", description="Tokens sent to the embedding model"
)
index_lag = meter.create_histogram(
    "index.lag", unit="ms", description="Time from a note write to its chunks being searchable"
)
index_duration = meter.create_histogram(
    "index.duration", unit="ms", description="Time to index one note (chunk, embed, swap)"
)
index_failures = meter.create_counter(
    "index.failures", unit="{attempt}", description="Indexing attempts that failed"
)
chunk_search_duration = meter.create_histogram(
    "chunk.search.duration", unit="ms", description="Chunk search latency (embedding included)"
)


@dataclass(slots=True)
class _QueueDepth:
    """The latest indexing queue depth (read by the observable gauge)."""

    pending: int = 0
    failed: int = 0


_queue_depth = _QueueDepth()


def set_queue_depth(pending: int, failed: int) -> None:
    """Record the latest indexing queue depth (read by the observable gauge)."""
    _queue_depth.pending = pending
    _queue_depth.failed = failed


def _observe_queue(_options: Any) -> list[metrics.Observation]:
    return [
        metrics.Observation(_queue_depth.pending, {"state": "pending"}),
        metrics.Observation(_queue_depth.failed, {"state": "failed"}),
    ]


meter.create_observable_gauge(
    "index.queue.depth",
    callbacks=[_observe_queue],
    unit="{note}",
    description="Notes waiting to be indexed (pending) or given up on (failed)",
)

_setup_lock = threading.Lock()
_setup_done = False


def setup_telemetry() -> bool:
    """Install the SDK meter/tracer providers once per process; returns True if installed.

    Prometheus text is served from the default prometheus_client registry at `/metrics`.
    """
    global _setup_done
    with _setup_lock:
        if _setup_done:
            return False
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider

        resource = Resource.create(
            {"service.name": os.environ.get("OTEL_SERVICE_NAME", "autonote")}
        )
        readers: list[Any] = [PrometheusMetricReader()]
        tracer_provider = TracerProvider(resource=resource)
        if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
            tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))
        trace.set_tracer_provider(tracer_provider)
        _setup_done = True
        return True


class MongoSpanListener(monitoring.CommandListener):
    """One client span per MongoDB command (`db.system=mongodb`), ended on reply."""

    def __init__(self) -> None:
        self._spans: dict[tuple[int, Any], Any] = {}

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        span = tracer.start_span(
            f"mongodb.{event.command_name}",
            kind=trace.SpanKind.CLIENT,
            attributes={
                "db.system": "mongodb",
                "db.name": event.database_name,
                "db.operation": event.command_name,
            },
        )
        self._spans[(event.request_id, event.connection_id)] = span

    def _finish(self, event: Any, error: str | None = None) -> None:
        span = self._spans.pop((event.request_id, event.connection_id), None)
        if span is None:
            return
        if error:
            span.set_status(trace.Status(trace.StatusCode.ERROR, error))
        span.end()

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        self._finish(event)

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        self._finish(event, str(event.failure.get("errmsg", "failed")))
