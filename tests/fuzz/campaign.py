"""The long fuzz campaign behind the `fuzz` section (docs/benchmarks/faults.md) and its
claim row: the same targets as the always-on tests, with many more cases, plus atheris and
the API-level runs.

    .venv/bin/python -m tests.fuzz.campaign [--examples 1000] [--heavy 200]
        [--atheris-seconds 120] [--stateful 200] [--no-write]

- hypothesis: every chunker source (`--examples` each) and importer source (`--heavy` for
  the mutated fixtures, which cost ~0.3 s each), plus the hand-made hostile documents;
- atheris (if installed): coverage-guided, `--atheris-seconds` per target;
- API: the schemathesis state machine (`--stateful` scenarios) and the whole-schema
  positive/negative run, the raw-socket body-limit tests and the prompt-injection tests, each
  as a pytest run in a subprocess.
A failure in one target is recorded (and makes the exit code 1); the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import Claim, machine_note, markdown_table, update_claims, update_section
from tests.fuzz.generators import CHUNK_INPUTS, IMPORT_INPUTS
from tests.fuzz.targets import FuzzStats, fuzz_chunker, fuzz_importer, import_case

REPO = Path(__file__).resolve().parents[2]
HEAVY_SOURCES = ("mutated_fixtures", "mutated_docx_members")


@dataclass
class Row:
    """One line of the report."""

    target: str
    cases: int
    crashes: int
    detail: str
    seconds: float


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]


def hypothesis_rows(examples: int, heavy: int) -> list[Row]:
    rows = []
    jobs = [("chunker", s, examples) for s in sorted(CHUNK_INPUTS)] + [
        ("import", s, heavy if s in HEAVY_SOURCES else examples) for s in sorted(IMPORT_INPUTS)
    ]
    for kind, source, count in jobs:
        stats = FuzzStats(f"{kind}/{source}")
        start = time.perf_counter()
        crashes, detail = 0, ""
        try:
            (fuzz_chunker if kind == "chunker" else fuzz_importer)(source, count, stats)
        except Exception as exc:  # recorded as a finding, the campaign goes on
            crashes, detail = 1, f"FAILED: {type(exc).__name__}: {_first_line(exc)}; "
        outcomes = ", ".join(f"{k} {v}" for k, v in stats.outcomes.most_common())
        detail += f"{outcomes}; slowest {stats.slowest_s:.2f} s ({stats.slowest})"
        rows.append(
            Row(
                f"hypothesis {kind}: {source}",
                stats.cases,
                crashes,
                detail,
                time.perf_counter() - start,
            )
        )
        print(f"{rows[-1].target}: {stats.cases} cases, {crashes} crashes", file=sys.stderr)
    return rows


def hostile_row() -> Row:
    from tests.fuzz.test_import_fuzz import HOSTILE

    stats = FuzzStats("import/hostile")
    start = time.perf_counter()
    wrong = []
    for name, (filename, data, expected, max_bytes) in sorted(HOSTILE.items()):
        try:
            got = import_case(filename, data, stats, max_bytes=max_bytes)
        except Exception as exc:
            got = f"{type(exc).__name__}"
        if got != expected:
            wrong.append(f"{name}: {got} (expected {expected})")
    detail = "; ".join(wrong) or ", ".join(f"{k} {v}" for k, v in stats.outcomes.most_common())
    return Row(
        "hand-made hostile documents", len(HOSTILE), len(wrong), detail, time.perf_counter() - start
    )


def atheris_rows(seconds: int) -> list[Row]:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return [Row("atheris", 0, 0, "not installed (pip install -e '.[fuzz]')", 0.0)]
    from tests.fuzz.test_atheris import run_atheris

    rows = []
    for target in ("chunker", "importer"):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            code, runs, output = run_atheris(target, seconds, Path(tmp))
            crashes = len(list(Path(tmp).glob("crash-*"))) + len(list(Path(tmp).glob("timeout-*")))
            cov = [ln for ln in output.splitlines() if " DONE " in ln][-1:] or [""]
            detail = f"exit {code}; {cov[0].split('DONE')[-1].strip()[:120]}"
            rows.append(
                Row(
                    f"atheris {target} ({seconds} s)",
                    runs,
                    crashes or int(code != 0),
                    detail,
                    time.perf_counter() - start,
                )
            )
    return rows


def pytest_row(label: str, args: list[str], env: dict[str, str], stats_file: Path) -> Row:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        env={**os.environ, **env, "AUTONOTE_FUZZ_STATS": str(stats_file)},
        capture_output=True,
        text=True,
        check=False,
    )
    summary = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
    cases, notes = 0, []
    if stats_file.exists():
        for line in stats_file.read_text().splitlines():
            record = json.loads(line)
            cases += record.get("calls", 0)
            notes += [record["note"]] if "note" in record else []
        stats_file.unlink()
    detail = "; ".join([summary, *notes])
    return Row(label, cases, int(proc.returncode != 0), detail, time.perf_counter() - start)


def api_rows(stateful: int, schema_examples: int) -> list[Row]:
    with tempfile.TemporaryDirectory() as tmp:
        stats = Path(tmp) / "stats.jsonl"
        return [
            pytest_row(
                f"schemathesis stateful ({stateful} scenarios ≤ 8 calls)",
                ["tests/fuzz/test_schemathesis_stateful.py"],
                {"AUTONOTE_STATEFUL_EXAMPLES": str(stateful)},
                stats,
            ),
            pytest_row(
                f"schemathesis every operation, positive+negative ({schema_examples} each)",
                ["tests/test_schemathesis.py"],
                {"AUTONOTE_SCHEMATHESIS_EXAMPLES": str(schema_examples)},
                stats,
            ),
            pytest_row(
                "oversized bodies over a raw socket", ["tests/fuzz/test_body_limits.py"], {}, stats
            ),
            pytest_row(
                "prompt injection (obedient model)",
                ["tests/fuzz/test_prompt_injection.py"],
                {},
                stats,
            ),
        ]


INTRO = (
    "A chunker case passes when it returns within 10 s and every DESIGN §4 invariant holds "
    "(offsets, no overlap, no dropped character, token limits); an importer case when "
    "`convert_file` returns a note or raises `ImportFileError` with a known code within 20 s. "
    "API rows count HTTP calls (stateful) or report the pytest summary."
)


def render(rows: list[Row], command: str) -> str:
    total = sum(r.cases for r in rows)
    crashes = sum(r.crashes for r in rows)
    table = markdown_table(
        ["target", "cases", "crashes / failures", "outcomes, slowest input", "wall s"],
        [[r.target, r.cases, r.crashes, r.detail, f"{r.seconds:.0f}"] for r in rows],
    )
    lines = [
        "## Fuzzing: hostile input",
        "",
        machine_note(),
        "",
        f"Reproduce: `{command}`. Always-on short versions: `.venv/bin/pytest tests/fuzz -q`;"
        " atheris alone: `pytest -m slow tests/fuzz/test_atheris.py`.",
        "",
        f"**{total} cases tried, {crashes} crashes or failed checks.** {INTRO}",
        "",
        table,
    ]
    return "\n".join(lines) + "\n"


def claims(rows: list[Row]) -> list[Claim]:
    """The claims-table row: cases tried and crashes or failed checks (target 0)."""
    crashes = sum(r.crashes for r in rows)
    skipped = [r.target for r in rows if r.cases == 0 and "not installed" in r.detail]
    result = f"{sum(r.cases for r in rows)} cases ({len(rows)} targets), {crashes} crashes"
    if skipped:
        result += f"; not run: {', '.join(skipped)}"
    return [Claim("fuzz", result, crashes == 0)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--heavy", type=int, default=200)
    parser.add_argument("--atheris-seconds", type=int, default=120)
    parser.add_argument("--stateful", type=int, default=200)
    parser.add_argument("--schema-examples", type=int, default=50)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    rows = hypothesis_rows(args.examples, args.heavy)
    rows.append(hostile_row())
    rows += atheris_rows(args.atheris_seconds)
    rows += api_rows(args.stateful, args.schema_examples)
    command = "python -m tests.fuzz.campaign " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:]) if a != "--no-write"
    )
    body = render(rows, command.strip())
    print(body)
    if not args.no_write:
        update_section("fuzz", body)
        update_claims(claims(rows), command.strip())
    sys.exit(1 if any(r.crashes for r in rows) else 0)


if __name__ == "__main__":
    main()
