"""Summaries, the `load` section and its claim row for `benchmarks/load.py` (pure: no I/O)."""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from benchmarks.common import Claim, machine_note, markdown_table
from benchmarks.load_mix import Sample
from benchmarks.service_harness import LatencySummary, summarize

WRITE_ROUTES = ("POST /v1/notes", "PATCH", "/restore")


@dataclass
class LevelResult:
    """Everything measured at one concurrency level."""

    concurrency: int
    wall_s: float
    samples: list[Sample]
    baseline: list[Sample] = field(default_factory=list)  # GET /healthz, same clients
    lags_s: list[float] = field(default_factory=list)
    lag_unfinished: int = 0
    lag_dropped: int = 0
    queue: list[tuple[float, int]] = field(default_factory=list)
    drain_s: float | None = None  # after the load stopped, until the queue was empty
    queue_started: float = 0.0  # perf_counter when the queue sampler started

    @property
    def errors(self) -> int:
        return sum(1 for s in self.samples if s.status != s.expected)

    @property
    def error_rate(self) -> float:
        return self.errors / len(self.samples) if self.samples else 0.0

    @property
    def throughput(self) -> float:
        """Requests per second (all answered requests) over the level's wall time."""
        return len(self.samples) / self.wall_s if self.wall_s else 0.0

    @property
    def ok_throughput(self) -> float:
        ok = sum(1 for s in self.samples if s.status == s.expected)
        return ok / self.wall_s if self.wall_s else 0.0

    @property
    def writes_per_s(self) -> float:
        writes = sum(1 for s in self.samples if any(w in s.route for w in WRITE_ROUTES))
        return writes / self.wall_s if self.wall_s else 0.0

    def overall(self) -> LatencySummary:
        return summarize([s.latency_s for s in self.samples])

    def by_route(self) -> dict[str, LatencySummary]:
        groups: dict[str, list[float]] = defaultdict(list)
        for s in self.samples:
            groups[s.route].append(s.latency_s)
        return {route: summarize(v) for route, v in sorted(groups.items())}

    def statuses(self) -> Counter[str]:
        return Counter(
            f"{s.route} → {s.status or 'no response'}"
            for s in self.samples
            if s.status != s.expected
        )


def holds(level: LevelResult, p95_ms: float, max_error_rate: float = 0.01) -> bool:
    """The level meets the latency target with (almost) no errors."""
    return (
        bool(level.samples) and level.overall().p95 <= p95_ms and level.error_rate <= max_error_rate
    )


def knee(levels: list[LevelResult], p95_ms: float) -> LevelResult | None:
    """The level with the highest throughput among those that hold the target."""
    holding = [lv for lv in levels if holds(lv, p95_ms)]
    return max(holding, key=lambda lv: lv.ok_throughput) if holding else None


TARGETS_MS = (500.0, 1000.0, 2000.0, 5000.0)


def knee_table(levels: list[LevelResult]) -> str:
    """For several P95 targets, the best throughput that holds it."""
    rows = []
    for target in TARGETS_MS:
        best = knee(levels, target)
        rows.append(
            [
                f"≤ {target:.0f} ms",
                f"{best.ok_throughput:.1f}" if best else "—",
                best.concurrency if best else "—",
                f"{best.overall().p95:.0f}" if best else "—",
            ]
        )
    return markdown_table(["P95 target", "req/s held", "at users", "measured P95 ms"], rows)


def busy_split(level: LevelResult, started: float, routes: tuple[str, ...]) -> str:
    """P50/P95 of `routes` while the indexing queue was empty vs not (queue sampled every
    second; each request takes the depth last sampled before it finished)."""
    if not level.queue:
        return "—"
    times = [started + t for t, _ in level.queue]
    idle: list[float] = []
    busy: list[float] = []
    for s in level.samples:
        if s.route not in routes:
            continue
        i = bisect_right(times, s.finished) - 1
        (busy if i >= 0 and level.queue[i][1] > 0 else idle).append(s.latency_s)
    parts = []
    for name, values in (("queue empty", idle), ("indexing", busy)):
        if values:
            x = summarize(values)
            parts.append(f"{name}: {x.p50:.0f} / {x.p95:.0f} ms (n={x.n})")
    return "; ".join(parts) or "—"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _lag(level: LevelResult) -> str:
    if not level.lags_s:
        return "—"
    text = (
        f"{_pct(level.lags_s, 0.5):.1f} / {_pct(level.lags_s, 0.95):.1f} / "
        f"{max(level.lags_s):.1f} (n={len(level.lags_s)})"
    )
    if level.lag_unfinished:
        text += f", {level.lag_unfinished} not indexed within the probe timeout"
    return text


def _series(points: list[tuple[float, int]], every_s: float = 5.0) -> str:
    out: list[str] = []
    next_t = 0.0
    for t, depth in points:
        if t >= next_t:
            out.append(str(depth))
            next_t = t + every_s
    return " ".join(out) or "—"


def level_table(levels: list[LevelResult], p95_ms: float) -> str:
    rows = []
    for lv in levels:
        total = lv.overall()
        base = summarize([s.latency_s for s in lv.baseline]) if lv.baseline else None
        rows.append(
            [
                lv.concurrency,
                len(lv.samples),
                f"{lv.throughput:.1f}",
                f"{lv.writes_per_s:.1f}",
                f"{100 * lv.error_rate:.2f} %",
                f"{total.p50:.0f} / {total.p95:.0f} / {total.p99:.0f}",
                f"{base.p50:.1f} ({total.p50 / base.p50:.0f}×)" if base else "—",
                "yes" if holds(lv, p95_ms) else "no",
                _lag(lv),
                max((d for _, d in lv.queue), default=0),
                "—" if lv.drain_s is None else f"{lv.drain_s:.0f}",
            ]
        )
    headers = [
        "users",
        "requests",
        "req/s",
        "writes/s",
        "errors",
        "P50 / P95 / P99 ms (all routes)",
        "GET /healthz P50 ms (mix P50 ×)",
        f"P95 ≤ {p95_ms:.0f} ms",
        "index lag s P50 / P95 / max",
        "max queue",
        "drain s",
    ]
    return markdown_table(headers, rows)


def claims(levels: list[LevelResult], p95_ms: float) -> list[Claim]:
    """The claims-table row: the highest level against the latency target, and its P50
    against GET /healthz on the same connections."""
    top = levels[-1]
    total = top.overall()
    result = (
        f"{top.concurrency} users, realistic mix: {top.ok_throughput:.1f} req/s, P95 "
        f"{total.p95:.0f} ms, {100 * top.error_rate:.2f} % errors"
    )
    if top.baseline:
        base = summarize([s.latency_s for s in top.baseline])
        result += f"; mix P50 {total.p50 / base.p50:.0f}× GET /healthz on the same connections"
    best = knee(levels, p95_ms)
    if best is not None and best is not top:
        result += f"; most held: {best.ok_throughput:.1f} req/s at {best.concurrency} users"
    return [Claim("load", result, holds(top, p95_ms))]


def route_table(level: LevelResult) -> str:
    errors = Counter(s.route for s in level.samples if s.status != s.expected)
    rows = [
        [
            route,
            s.n,
            f"{s.n / level.wall_s:.1f}",
            f"{s.p50:.0f}",
            f"{s.p95:.0f}",
            f"{s.p99:.0f}",
            errors.get(route, 0),
        ]
        for route, s in level.by_route().items()
    ]
    return markdown_table(["route", "n", "req/s", "P50 ms", "P95 ms", "P99 ms", "errors"], rows)


def report(
    levels: list[LevelResult], *, p95_ms: float, command: str, setup: list[str], mix: str
) -> str:
    """The markdown section: headline, levels, per-route latencies, errors, queue depth."""
    best = knee(levels, p95_ms)
    if best is not None:
        headline = (
            f"**Holds {best.ok_throughput:.1f} requests/s at P95 ≤ {p95_ms:.0f} ms** "
            f"(all routes of the mix together, {best.concurrency} concurrent users, "
            f"{100 * best.error_rate:.2f} % errors; measured P95 {best.overall().p95:.0f} ms)."
        )
    else:
        headline = f"No level kept P95 ≤ {p95_ms:.0f} ms with < 1 % errors."
    peak = max(levels, key=lambda lv: lv.ok_throughput)
    lines = [
        "## Load: concurrent users on the running API",
        "",
        machine_note(),
        "",
        f"Reproduce: `{command}`",
        "",
        *[f"- {line}" for line in setup],
        f"- Mix (shares of actions): {mix}.",
        "",
        headline,
        f"Peak throughput {peak.ok_throughput:.1f} req/s at {peak.concurrency} users "
        f"(P95 {peak.overall().p95:.0f} ms).",
        "",
        level_table(levels, p95_ms),
        "",
        knee_table(levels),
        "",
        "Index lag: seconds from a write's 201/200 until `GET /v1/notes/{id}` shows it "
        "`indexed` at that version (a sample of writes, polled every 0.2 s). Max queue: notes "
        "pending or indexing, sampled every second; drain: seconds after the load stopped "
        "until the queue was empty.",
        "",
        f"### Per route at the knee ({(best or peak).concurrency} users)",
        "",
        route_table(best or peak),
        "",
    ]
    if (best or peak) is not levels[-1]:
        lines += [
            f"### Per route at the highest level ({levels[-1].concurrency} users)",
            "",
            route_table(levels[-1]),
            "",
        ]
    lines += [
        "### Errors by route and status",
        "",
    ]
    for lv in levels:
        counts = lv.statuses()
        text = ", ".join(f"{k}: {v}" for k, v in counts.most_common()) or "none"
        lines.append(f"- {lv.concurrency} users: {text}")
    lines += ["", "### Search and chat while indexing vs idle (P50 / P95)", ""]
    for lv in levels:
        for route in ("POST /v1/search (hybrid)", "POST /v1/chat (extractive)"):
            lines.append(
                f"- {lv.concurrency} users, {route}: {busy_split(lv, lv.queue_started, (route,))}"
            )
    lines += ["", "### Queue depth over time (every 5 s, load then drain)", ""]
    lines += [f"- {lv.concurrency} users: {_series(lv.queue)}" for lv in levels]
    return "\n".join(lines) + "\n"
