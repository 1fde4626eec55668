"""The `faults` section (docs/benchmarks/faults.md) and its claim rows, built from the
stored scenario results."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.common import Claim


def _fmt(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_fmt(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return json.dumps(value)
    return str(value)


_RECOVERY_KEYS = (
    "kill_to_ready_s",
    "restart_to_first_success_s",
    "restart_to_serving_s",
    "converged_after_recovery_s",
    "reindex_to_indexed_s",
)
_LATENCY_KEYS = ("outage_503_latency", "write_latency_error", "hybrid_search_latency")


def _first(figures: dict[str, Any], keys: tuple[str, ...]) -> str:
    for key in keys:
        if key in figures:
            value = figures[key]
            if isinstance(value, dict):
                return f"{key}: p95 {value.get('p95_ms')} ms, max {value.get('max_ms')} ms"
            return f"{key}: {_fmt(value)}"
    return "-"


def _summary(results: list[dict[str, Any]]) -> list[str]:
    """One line per scenario: writes attempted/acknowledged/lost, failure latency,
    recovery, check."""
    lines = [
        "| scenario | writes attempted / acknowledged / lost | failure latency | recovery | "
        "check violations |",
        "|---|---|---|---|---|",
    ]
    for r in sorted(results, key=lambda r: r["scenario"]):
        f = r["figures"]
        lost = f.get("acknowledged_lost", f.get("acknowledged_lost_after_restart", "-"))
        writes = (
            f"{f['writes_attempted']} / {f['writes_acknowledged']} / {lost}"
            if "writes_attempted" in f
            else "-"
        )
        check = f.get("check_violations", f.get("check_violations_after", "-"))
        lines.append(
            f"| {r['scenario']} | {writes} | {_first(f, _LATENCY_KEYS)} | "
            f"{_first(f, _RECOVERY_KEYS)} | {check} |"
        )
    return lines


def faults_claims(results: list[dict[str, Any]]) -> list[Claim]:
    """The claims-table rows: acknowledged writes lost when the API or the database is
    SIGKILLed, and when the database's disk fills (target 0 for both)."""
    out = []
    kills = [r["figures"] for r in results if "sigkill" in r["scenario"]]
    if kills:
        acked = sum(f["writes_acknowledged"] for f in kills)
        lost = sum(f["acknowledged_lost"] for f in kills)
        out.append(
            Claim(
                "faults_sigkill",
                f"{lost} of {acked} acknowledged writes lost in {len(kills)} scenarios (the "
                f"API killed {sum(f.get('kills', 0) for f in kills)} times, the database "
                f"{sum(f.get('outages', 0) for f in kills)} times)",
                lost == 0,
            )
        )
    disk = [r["figures"] for r in results if r["scenario"].startswith("d_disk_full")]
    if disk:
        acked = sum(f["writes_acknowledged"] for f in disk)
        lost = sum(f["acknowledged_lost_after_restart"] for f in disk)
        out.append(
            Claim(
                "faults_disk_full",
                f"{lost} of {acked} acknowledged writes lost after the embedded server ran out "
                "of disk and was restarted with more",
                lost == 0,
            )
        )
    return out


def faults_section(results: list[dict[str, Any]], command: str) -> str:
    """Markdown: one table per scenario (figure | value) plus its notes."""
    lines = [
        "## Faults",
        "",
        "Fault scenarios run as tests (tests/faults); each run stores its figures and this "
        "section is rebuilt from the latest run of every scenario. Rerun with:",
        "",
        f"    {command}",
        "",
        "A write is *acknowledged* when the API answered 200/201; *lost* counts acknowledged "
        "writes missing or not holding an acknowledged (or later attempted) content "
        "afterwards. Latencies are wall-clock on a shared 2-core machine (noisy).",
        "",
        *_summary(results),
    ]
    for result in sorted(results, key=lambda r: r["scenario"]):
        lines += [
            "",
            f"### {result['scenario']}: {result['title']}",
            "",
            f"Recorded {result['recorded_at']}.",
            "",
            "| figure | value |",
            "|---|---|",
        ]
        lines += [f"| {k} | {_fmt(v)} |" for k, v in result["figures"].items()]
        history = result.get("lost_history") or []
        if len(history) > 1:
            lines += [
                "",
                f"Acknowledged writes lost in the last {len(history)} recorded runs: "
                f"{history} ({sum(1 for n in history if n)} run(s) with a loss).",
            ]
        if result.get("notes"):
            lines += ["", result["notes"]]
    return "\n".join(lines)
