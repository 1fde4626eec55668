"""The load benchmark end to end at smoke size (a 6-second level against the app served by
uvicorn), and its knee/report logic on synthetic results."""

from __future__ import annotations

import random
from typing import Any

from benchmarks.load import LoadConfig, Target, mongo_depth, run_load
from benchmarks.load_mix import Sample
from benchmarks.load_report import LevelResult, claims, holds, knee, report
from tests.conftest import ADMIN_TOKEN, ServedApp


async def test_six_second_load_run(make_settings: Any, mongo_url: str, db_name: str) -> None:
    config = LoadConfig(
        levels=(2,),
        duration_s=6.0,
        seed_notes=2,
        baseline_s=1.0,
        lag_share=1.0,
        drain_timeout_s=120.0,
    )
    with ServedApp(make_settings(log_level="ERROR")) as app:
        (level,) = await run_load(
            Target(app.url, ADMIN_TOKEN, mongo_depth(mongo_url, db_name)), config
        )
    routes = {s.route for s in level.samples}
    assert {"POST /v1/notes", "GET /v1/notes/{id}", "POST /v1/search (hybrid)"} <= routes
    # It ran its 6 s and stopped at that deadline, not at its request budget (how long the
    # last requests took is the benchmark's figure).
    assert len(level.samples) >= 10 and level.wall_s >= 5.5
    assert len(level.samples) < config.max_requests
    assert [s for s in level.samples if s.status != s.expected] == []
    assert level.baseline and all(s.status == 200 for s in level.baseline)
    assert level.lags_s and level.lag_unfinished == 0 and level.drain_s is not None
    assert level.queue and level.queue[-1][1] == 0  # sampled until the queue drained
    text = report([level], p95_ms=60_000, command="x", setup=["s"], mix="m")
    assert "Holds" in text and "| 2 |" in text and "POST /v1/search (hybrid)" in text
    (claim,) = claims([level], p95_ms=60_000)
    assert claim.passed and "GET /healthz on the same connections" in claim.result


def _level(users: int, seconds: float, latencies_ms: list[float], errors: int = 0) -> LevelResult:
    samples = [Sample("GET /v1/notes/{id}", 200, 200, ms / 1000, 0.0) for ms in latencies_ms]
    samples += [Sample("GET /v1/notes/{id}", 500, 200, 0.01, 0.0) for _ in range(errors)]
    return LevelResult(users, seconds, samples)


def test_knee_is_the_best_throughput_within_the_target() -> None:
    rng = random.Random(1)
    levels = [
        _level(1, 10, [rng.uniform(10, 50) for _ in range(100)]),  # 10 req/s, fast
        _level(2, 10, [rng.uniform(10, 90) for _ in range(180)]),  # 18 req/s
        _level(4, 10, [rng.uniform(10, 400) for _ in range(200)]),  # 20 req/s, slow tail
        _level(8, 10, [rng.uniform(10, 60) for _ in range(400)], errors=30),  # many errors
    ]
    assert knee(levels, 100.0) is levels[1]
    assert knee(levels, 1000.0) is levels[2]  # level 8 is faster but fails the error rule
    assert not holds(levels[3], 1000.0) and knee(levels, 5.0) is None
    assert "No level kept P95 ≤ 5 ms" in report(levels, p95_ms=5, command="", setup=[], mix="")
    (claim,) = claims(levels, p95_ms=1000.0)
    assert not claim.passed and claim.result.startswith("8 users, realistic mix: ")
    assert claim.result.endswith("; most held: 20.0 req/s at 4 users")
