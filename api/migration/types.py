"""What a migration run reports (each note's result, the running totals, the summary with
its exit code and JSON form) and the per-note loop's verdict on a note's state. Pure data;
`api.migration.runner` and `api.migration.drive` fill it in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from bson import ObjectId

from api.indexing.types import IndexStats

MAX_LISTED_FAILURES = 50
FinalStatus = Literal["indexed", "failed", "skipped"]
# wait: claim again after `wait_s`; hold: read the state again after it, without claiming.
VerdictKind = Literal["indexed", "failed", "skipped", "wait", "hold", "retry", "requeue"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with a note `Reconciler.run_once(note_id)` could not finish."""

    kind: VerdictKind
    wait_s: float = 0.0
    detail: str | None = None

    @property
    def final(self) -> bool:
        return self.kind in ("indexed", "failed", "skipped")


@dataclass(slots=True)
class RunWork:
    """The work of one note's runs in this migration (an edit mid-run means two runs)."""

    embedded: int = 0
    reused: int = 0
    tokens_embedded: int = 0

    def add(self, stats: IndexStats) -> None:
        self.embedded += stats.embedded
        self.reused += stats.reused
        self.tokens_embedded += stats.tokens_embedded


@dataclass(frozen=True, slots=True)
class NoteResult:
    """How one note ended. Work counters add up every run of the note made by this
    migration (an edit mid-run means two runs); `chunks` is the final chunk count."""

    note_id: ObjectId
    status: FinalStatus
    chunks: int = 0
    embedded: int = 0
    reused: int = 0
    tokens_embedded: int = 0
    by_other: bool = False
    detail: str | None = None


@dataclass
class MigrationStats:
    """Running totals; `done` counts selected notes that reached a final state."""

    selected: int = 0
    done: int = 0
    indexed: int = 0
    failed: int = 0
    skipped: int = 0
    indexed_by_others: int = 0
    # Counted as selected, never reached: indexed by another worker, deleted or trashed
    # before the run's pages got to them (done + this = selected once the pass ends).
    left_selection: int = 0
    # Net the other way: more notes reached than were selected at the start (pages re-run
    # the selection, so a note edited into it mid-run is migrated too).
    # done = selected - left + joined.
    joined_selection: int = 0
    reindexed_after_edit: int = 0
    # Catch-up runs that failed: the note is counted once, by its first pass, so its failure
    # after an edit is counted here, not in `failed` (indexed + failed + skipped = `done`).
    failed_after_edit: int = 0
    chunks: int = 0
    embedded: int = 0
    reused: int = 0
    tokens_embedded: int = 0
    # Notes whose legacy shape (no status, times as strings) was stored as the API writes
    # it, whether selected for indexing or not (one an API worker indexed first is not).
    normalized: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    skip_reasons: dict[str, int] = field(default_factory=dict)

    def record(self, result: NoteResult, *, catch_up: bool = False) -> None:
        """Add one note's result. Catch-up results (a note re-queued by an edit after its
        first run) do not count as new notes; a failure still fails the run."""
        self.embedded += result.embedded
        self.reused += result.reused
        self.tokens_embedded += result.tokens_embedded
        if result.status == "failed":
            if catch_up:
                self.failed_after_edit += 1
            else:
                self.failed += 1
            if len(self.failures) < MAX_LISTED_FAILURES:
                self.failures.append((str(result.note_id), result.detail or "failed"))
        if catch_up:
            if result.status == "indexed":
                self.reindexed_after_edit += 1
            return
        self.done += 1
        if result.status == "indexed":
            self.indexed += 1
            self.chunks += result.chunks
            self.indexed_by_others += result.by_other
        elif result.status == "skipped":
            self.skipped += 1
            key = result.detail or "skipped"
            self.skip_reasons[key] = self.skip_reasons.get(key, 0) + 1


@dataclass
class MigrationSummary:
    """The end of a run, whatever ended it."""

    stats: MigrationStats
    duration_s: float
    interrupted: bool = False
    error: str | None = None

    @property
    def exit_code(self) -> int:
        """0: every selected note ended indexed (or left the selection: deleted/trashed);
        1: a note failed or the run hit an error; 130: interrupted (rerun to resume)."""
        if self.interrupted:
            return 130
        if self.error is not None or self.stats.failed or self.stats.failed_after_edit:
            return 1
        return 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (the `--json` output and the final log line)."""
        s = self.stats
        return {
            "dry_run": False,
            "selected": s.selected,
            "done": s.done,
            "indexed": s.indexed,
            "failed": s.failed,
            "skipped": s.skipped,
            "skip_reasons": s.skip_reasons,
            "indexed_by_other_workers": s.indexed_by_others,
            "left_selection": s.left_selection,
            "joined_selection": s.joined_selection,
            "reindexed_after_edit": s.reindexed_after_edit,
            "failed_after_edit": s.failed_after_edit,
            "chunks": s.chunks,
            "embedded": s.embedded,
            "reused": s.reused,
            "tokens_embedded": s.tokens_embedded,
            "normalized": s.normalized,
            "duration_s": round(self.duration_s, 3),
            "interrupted": self.interrupted,
            "error": self.error,
            "failures": [{"note_id": n, "error": e} for n, e in s.failures],
            "exit_code": self.exit_code,
        }
