"""What a check found: counts and a few examples per kind, as JSON or a rich table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from api.integrity.rules import ALL_KINDS, INFO_KINDS, Finding

DESCRIPTIONS: dict[str, str] = {
    "index_behind": "active note indexed at an older version than its own",
    "not_queued": "active note neither indexed nor queued",
    "failed": "indexing gave up (listed, not a violation; `reindex` or --retry-failed)",
    "chunk_count": "chunk_count differs from the chunks of indexed_version (or served's)",
    "orphan_chunks": "chunks of a missing or trashed note, or of a dead version",
    "duplicate_chunks": "same (note_id, generation, note_version, chunk_index) stored twice",
    "bad_vector": "vector not float32 / wrong dimensions / model differs from the note's",
    "bad_offsets": "chunk offsets outside its note",
    "content_mismatch": "chunk text differs from its span of the note",
    "author_mismatch": "chunk author_id differs from its note's (isolation)",
    "unaddressable": "legacy _id that is not an ObjectId: never indexed (listed; reinsert it)",
}


@dataclass(slots=True)
class KindSummary:
    """Totals of one kind of finding."""

    kind: str
    notes: int = 0
    chunks: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def violation(self) -> bool:
        return self.kind not in INFO_KINDS


@dataclass(slots=True)
class RepairResult:
    """What `--repair` did."""

    notes_requeued: int = 0
    chunks_deleted: int = 0


@dataclass(slots=True)
class CheckReport:
    """The outcome of one check (findings are the confirmed ones)."""

    database: str
    model_key: str
    notes_scanned: int = 0
    chunks_scanned: int = 0
    suspects: int = 0  # notes flagged by the scan, before the confirmation pass
    unsettled: int = 0  # suspects that changed on every confirmation read (not judged)
    duration_s: float = 0.0
    unique_index: bool = True
    findings: list[Finding] = field(default_factory=list)
    repair: RepairResult | None = None

    @property
    def violations(self) -> list[Finding]:
        return [f for f in self.findings if f.is_violation]

    @property
    def ok(self) -> bool:
        """True when nothing but informational findings (failed notes) was found."""
        return not self.violations

    def summaries(self, examples: int = 3) -> list[KindSummary]:
        """One row per kind (every kind, zeros included), in a fixed order."""
        rows = {kind: KindSummary(kind) for kind in ALL_KINDS}
        for f in self.findings:
            row = rows[f.kind]
            row.notes += 1
            row.chunks += f.chunks
            if len(row.examples) < examples:
                row.examples.append(f"note {f.note_id}: {f.detail}")
        return list(rows.values())

    def to_dict(self, examples: int = 3) -> dict[str, Any]:
        """A JSON-ready summary for machines (`autonote check --json`)."""
        return {
            "ok": self.ok,
            "database": self.database,
            "embedding_model": self.model_key,
            "notes_scanned": self.notes_scanned,
            "chunks_scanned": self.chunks_scanned,
            "suspects": self.suspects,
            "unsettled": self.unsettled,
            "duration_s": round(self.duration_s, 3),
            "unique_chunk_index": self.unique_index,
            "violations": sum(1 for f in self.violations),
            "kinds": {
                s.kind: {
                    "violation": s.violation,
                    "notes": s.notes,
                    "chunks": s.chunks,
                    "examples": s.examples,
                }
                for s in self.summaries(examples)
            },
            "repair": None
            if self.repair is None
            else {
                "notes_requeued": self.repair.notes_requeued,
                "chunks_deleted": self.repair.chunks_deleted,
            },
        }


def render(report: CheckReport, console: Any, examples: int = 3) -> None:
    """The summary table (rich) and a verdict line."""
    from rich.table import Table

    table = Table(
        title=f"autonote check: {report.notes_scanned} notes, {report.chunks_scanned} chunks "
        f"in {report.duration_s:.1f}s (database {report.database}, model {report.model_key})",
        title_justify="left",
    )
    table.add_column("check")
    table.add_column("notes", justify="right")
    table.add_column("chunks", justify="right")
    table.add_column("examples", overflow="fold")
    for row in report.summaries(examples):
        if row.notes == 0:
            status = "[green]ok[/green]"
        elif row.violation:
            status = "[red]VIOLATION[/red]"
        else:
            status = "[yellow]listed[/yellow]"
        table.add_row(
            f"{row.kind} {status}\n[dim]{DESCRIPTIONS[row.kind]}[/dim]",
            str(row.notes),
            str(row.chunks),
            "\n".join(row.examples),
        )
    console.print(table)
    if not report.unique_index:
        duplicates = any(s.kind == "duplicate_chunks" and s.notes for s in report.summaries(0))
        when = " once the duplicates are gone (`--repair`)" if duplicates else ""
        console.print(
            "[yellow]warning:[/yellow] note_chunks has no unique (note_id, generation, "
            f"note_version, chunk_index) index; start the API or run `autonote migrate`{when} "
            "to create it."
        )
    if report.unsettled:
        console.print(
            f"[yellow]note:[/yellow] {report.unsettled} note(s) changed during every "
            "confirmation read (busy being edited or indexed) and were not judged; run the "
            "check again when they are idle."
        )
    if report.repair is not None:
        console.print(
            f"repair: {report.repair.notes_requeued} notes re-queued, "
            f"{report.repair.chunks_deleted} orphan/bad chunks deleted; workers re-index the "
            "re-queued notes (run the check again once they are done)."
        )
    count = len(report.violations)
    verdict = "[green]clean[/green]" if report.ok else f"[red]{count} violation(s)[/red]"
    console.print(f"result: {verdict}")
