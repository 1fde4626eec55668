"""The BENCHMARKS.md `faults` section, built from the stored scenario results."""

from __future__ import annotations

import json
from typing import Any


def _fmt(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_fmt(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return json.dumps(value)
    return str(value)


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
        if result.get("notes"):
            lines += ["", result["notes"]]
    return "\n".join(lines)
