"""Markdown rendering of the notes-API benchmark results (`benchmarks/notes_api.py`)."""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING

from benchmarks.common import REPO_ROOT, Claim, machine_note, markdown_table
from benchmarks.notes_api_load import PAGE
from benchmarks.service_harness import LatencySummary, ratio, summarize

if TYPE_CHECKING:
    from benchmarks.notes_api_load import ModeResult, NoteSpec, Sizes

COMMAND = "python -m benchmarks.notes_api"
BASELINES = ("GET /healthz", "GET /readyz", "PyMongo find_one")


def code_version() -> str:
    """`git describe`-like id of the code measured (dirty when api/ has local changes)."""

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "api", "connectors")
    return f"{head}{' + uncommitted changes in api/ or connectors/' if dirty else ''}"


def _p50(result: ModeResult, route: str, conc: int) -> float:
    return summarize(result.phases[(route, conc)].samples).p50


def mode_table(result: ModeResult) -> str:
    """One markdown table: every series with its percentiles and baseline ratios."""
    rows = []
    for (route, conc), phase in result.phases.items():
        s: LatencySummary = summarize(phase.samples)
        rows.append(
            [
                route,
                conc,
                *s.row(),
                f"{phase.throughput:.0f}",
                ratio(s.p50, _p50(result, "GET /healthz", conc)),
                ratio(s.p50, _p50(result, "PyMongo find_one", conc)),
            ]
        )
    rows.sort(
        key=lambda r: (not str(r[0]).startswith(("GET /healthz", "GET /readyz", "PyMongo")), r[1])
    )
    headers = [
        "series",
        "conc.",
        "n",
        "P50 ms",
        "P95 ms",
        "P99 ms",
        "req/s",
        "P50 ÷ healthz",
        "P50 ÷ find_one",
    ]
    return markdown_table(headers, rows)


def load_table(results: dict[str, ModeResult]) -> str:
    """Workers on vs chunking disabled: raw, and normalised by each mode's healthz P50."""
    on, off = results.get("workers_on"), results.get("chunking_disabled")
    if on is None or off is None:
        return ""
    rows = []
    for key, phase in off.phases.items():
        if key not in on.phases:
            continue
        a, b = summarize(on.phases[key].samples), summarize(phase.samples)
        norm_on = a.p50 / _p50(on, "GET /healthz", key[1])
        norm_off = b.p50 / _p50(off, "GET /healthz", key[1])
        rows.append(
            [key[0], key[1], ratio(a.p50, b.p50), ratio(a.p95, b.p95), ratio(norm_on, norm_off)]
        )
    return markdown_table(
        ["series", "conc.", "P50 on ÷ off", "P95 on ÷ off", "(P50 ÷ healthz) on ÷ off"], rows
    )


def _noise_note(results: dict[str, ModeResult]) -> str:
    on, off = results["workers_on"], results["chunking_disabled"]
    moves = [
        _p50(on, route, conc) / _p50(off, route, conc)
        for route, conc in off.phases
        if route.startswith("PyMongo") and (route, conc) in on.phases
    ]
    return (
        f"For scale: the PyMongo baselines, whose code path is the same in both modes (only "
        f"the load on the shared server and CPUs differs), moved {min(moves):.2f}×–"
        f"{max(moves):.2f}× between the modes; on/off ratios inside that band are not "
        f"distinguishable from machine noise in this run."
    )


def claims(results: dict[str, ModeResult]) -> list[Claim]:
    """The claims-table row: one client, indexing on if measured (the default deployment),
    each route against its same-run baseline (no target)."""
    mode = "workers_on" if "workers_on" in results else next(iter(results))
    r = results[mode]
    get, post = _p50(r, "GET /v1/notes/{id}", 1), _p50(r, "POST /v1/notes", 1)
    page = _p50(r, f"GET /v1/notes (random page of {PAGE})", 1)
    query = _p50(r, f"PyMongo list query (page of {PAGE})", 1)
    return [
        Claim(
            "notes_api",
            f"indexing {'on' if mode == 'workers_on' else 'off'}, one client: GET a note P50 "
            f"{get:.1f} ms ({ratio(get, _p50(r, 'PyMongo find_one', 1))} PyMongo find_one), "
            f"POST {post:.1f} ms, a page of {PAGE} {page:.1f} ms ({ratio(page, query)} its "
            "own PyMongo query)",
        )
    ]


def report(results: dict[str, ModeResult], corpus: list[NoteSpec], sizes: Sizes) -> str:
    """The `notes_api` section."""
    kb = sorted(len(s.content_md.encode()) / 1024 for s in corpus)
    parts = [
        "## Notes API latency",
        "",
        f"Reproduce: `{COMMAND}`{' --quick' if sizes.notes < 1000 else ''}. {machine_note()} "
        f"Code: {code_version()}.",
        "",
        f"{len(corpus)} realistic markdown notes ({kb[0]:.1f}–{kb[-1]:.1f} KB, median "
        f"{kb[len(kb) // 2]:.1f} KB; fenced code, lists, tables, 1–3 tags), created through "
        f"`POST /v1/notes` (first half sequentially, second half at concurrency "
        f"{sizes.concurrency}). Listing: random pages of {PAGE} (cursors from an untimed "
        f"walk), unfiltered and with a tag on ~25 % of the notes. Each PATCH series edits "
        f"{sizes.patches} notes nobody patched before; a content PATCH sends the whole body "
        f"with one new paragraph (version +1), a tag PATCH adds one tag. Server: `autonote "
        f"serve` (uvicorn, default INFO JSON logs to a file) in its own process, rate limit "
        f"off; client: httpx keep-alive, one connection per concurrent worker. Throughput = "
        f"requests ÷ wall time of the series. Baselines (GET /healthz: no database; GET "
        f"/readyz: one `ping`; PyMongo: the same server straight from the client process) "
        f"are measured after the creates and again at the end, pooled.",
    ]
    for mode, result in results.items():
        what = (
            f"indexing ON (the default: 2 in-process loops, local ONNX model). By the end "
            f"{result.notes_indexed}/{result.notes_total} notes were indexed at their latest "
            f"version ({result.chunks} chunks): every series ran under indexing load"
            if mode == "workers_on"
            else "`CHUNKING_ENABLED=false`: no chunking or embedding, the API's own cost"
        )
        load = " → ".join(f"{x:.1f}" for x in result.load)
        route = f"GET /v1/notes (random page of {PAGE})"
        db_query = f"PyMongo list query (page of {PAGE})"
        own = ", ".join(
            f"{ratio(_p50(result, route, c), _p50(result, db_query, c))} at concurrency {c}"
            for c in sorted({conc for _, conc in result.phases})
        )
        parts += [
            "",
            f"### Mode `{mode}` — {what}",
            "",
            mode_table(result),
            "",
            f"Mode wall time {result.wall_s:.0f} s; 1-minute load average {load} on "
            f"{os.cpu_count()} logical CPUs. Listing query on this server: "
            f"{result.list_plan}; the listing route costs {own} its own database "
            f"query (PyMongo, same filter, projection, sort and limit).",
        ]
    table = load_table(results)
    if table:
        parts += [
            "",
            "### Cost of the background indexer",
            "",
            "The two modes run one after the other, so other jobs on the machine may differ "
            "between them; the last column divides each mode by its own healthz P50 to take "
            "some of that drift out (it also hides the indexer's cost to the bare HTTP "
            "stack).",
            "",
            table,
            "",
            _noise_note(results),
        ]
    return "\n".join(parts)
