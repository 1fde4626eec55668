"""What a switch to a new generation costs and how far it is (pure): the estimate logged at
start-up and the progress `GET /v1/index/status` and `autonote index status` report.

Tokens are estimated from the chunks the old generation holds (their `token_count`, in the
old model's tokenizer): an upper bound when only the chunker changed, since text whose
chunks did not change reuses its vectors. Once some notes are done, the estimate is scaled
by what they really cost (tokens embedded ÷ their old chunks' tokens), and the time left
follows the rate measured since the switch started (or resumed, after a restart); before
any is measured, a nominal rate per provider (`NOMINAL_TOKENS_PER_S`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


@dataclass
class SwitchProgress:
    """One or more users' switch to `target`, summed."""

    notes_total: int = 0  # active notes when the switch started
    notes_done: int = 0  # re-indexed into the target since
    tokens_estimate: int = 0  # the old chunks' tokens when the switch started
    estimate_done: int = 0  # the old chunks' tokens of the notes done
    tokens_embedded: int = 0  # what re-indexing really embedded so far
    # Since the latest (re)start: seconds, and tokens and notes then (for the rate).
    active_s: float = 0.0
    tokens_since: int = 0
    notes_since: int = 0

    def add_record(self, switch: dict[str, Any], now: datetime) -> None:
        """Add one user's `switch` sub-document."""
        self.notes_total += int(_number(switch.get("notes_total")))
        self.notes_done += int(_number(switch.get("notes_done")))
        self.tokens_estimate += int(_number(switch.get("tokens_estimate")))
        self.estimate_done += int(_number(switch.get("estimate_done")))
        embedded = int(_number(switch.get("tokens_embedded")))
        self.tokens_embedded += embedded
        resumed = switch.get("resumed_at") or switch.get("started_at")
        if isinstance(resumed, datetime):
            if resumed.tzinfo is None:
                resumed = resumed.replace(tzinfo=UTC)
            self.active_s = max(self.active_s, (now - resumed).total_seconds())
        self.tokens_since += embedded - int(_number(switch.get("resumed_tokens")))
        self.notes_since += int(_number(switch.get("notes_done"))) - int(
            _number(switch.get("resumed_notes"))
        )

    @property
    def scale(self) -> float:
        """Tokens really embedded per token of old chunks, as measured (1 before)."""
        if self.estimate_done <= 0:
            return 1.0
        return self.tokens_embedded / self.estimate_done

    @property
    def tokens_left(self) -> int:
        return round(max(0, self.tokens_estimate - self.estimate_done) * self.scale)


@dataclass
class Pricing:
    """The target model's price and the nominal rate before one is measured."""

    price_per_million: float | None
    nominal_tokens_per_s: float

    def cost(self, tokens: int) -> float | None:
        if self.price_per_million is None:
            return None
        return round(tokens * self.price_per_million / 1_000_000, 6)


def seconds_left(progress: SwitchProgress, notes_left: int, pricing: Pricing) -> float | None:
    """The time left at the rate measured since the (re)start: tokens per second when this
    switch embeds, else notes per second (a chunker change that reuses every vector);
    before anything is measured, tokens at the nominal rate."""
    if progress.active_s > 5 and progress.tokens_since > 0:
        return round(progress.tokens_left / (progress.tokens_since / progress.active_s), 1)
    if progress.active_s > 5 and progress.notes_since > 0:
        return round(notes_left / (progress.notes_since / progress.active_s), 1)
    if pricing.nominal_tokens_per_s <= 0:
        return None
    return round(progress.tokens_left / pricing.nominal_tokens_per_s, 1)


@dataclass
class ChangeEstimate:
    """What the re-indexing a start-up begins or resumes will cost (`index.generation_change`)."""

    target: dict[str, Any]  # generation, embedding_model, chunking_version
    sources: list[dict[str, Any]] = field(default_factory=list)  # the generations left
    users: int = 0
    notes: int = 0  # active notes to re-index (lacking the target)
    progress: SwitchProgress = field(default_factory=SwitchProgress)
    pricing: Pricing = field(default_factory=lambda: Pricing(None, 0.0))

    @property
    def tokens(self) -> int:
        return self.progress.tokens_left

    def as_log(self) -> dict[str, Any]:
        """The fields of the `index.generation_change` log line."""
        return {
            "users": self.users,
            "notes": self.notes,
            "estimated_tokens": self.tokens,
            "price_per_million_tokens_usd": self.pricing.price_per_million,
            "estimated_cost_usd": self.pricing.cost(self.tokens),
            "estimated_seconds": seconds_left(self.progress, self.notes, self.pricing),
            "to_model": self.target.get("embedding_model"),
            "to_chunker": self.target.get("chunking_version"),
            "from_models": sorted({str(s.get("embedding_model")) for s in self.sources}),
            "from_chunkers": sorted({str(s.get("chunking_version")) for s in self.sources}),
        }

    def summary(self) -> str:
        """Tokens, cost and time in one clause (each an estimate)."""
        fields = self.as_log()
        cost = fields["estimated_cost_usd"]
        money = "unknown (no price for this model)" if cost is None else f"about ${cost:,.4f}"
        seconds = fields["estimated_seconds"]
        time = "unknown" if seconds is None else f"about {_duration(seconds)}"
        return f"tokens to embed: {self.tokens:,}; cost: {money}; time: {time}"

    def describe(self) -> str:
        """One paragraph for a person (the confirmation prompt)."""
        return (
            f"The embedding model or chunker changed: {self.notes} notes of {self.users} "
            f"users will be re-indexed with {self.target.get('embedding_model')} "
            f"(chunker {self.target.get('chunking_version')}), beside the current index, "
            f"which keeps serving search until each user's new index is complete.\n"
            f"Estimated {self.summary()}."
        )


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def status_document(
    *,
    target: dict[str, Any],
    serving: dict[str, Any],
    counts: dict[str, int],
    progress: SwitchProgress | None,
    pricing: Pricing,
) -> dict[str, Any]:
    """The status reported for one user (or everyone): what search reads, what the
    configured generation holds, and the switch's progress and estimates."""
    switching = serving.get("generation") != target.get("generation")
    progress = progress or SwitchProgress()
    left = max(0, counts["total"] - counts["done"])
    tokens_left = progress.tokens_left if switching else 0
    return {
        "configured": target,
        "serving": serving,
        "switching": switching,
        "notes": {
            "total": counts["total"],
            "done": counts["done"],
            "left": left,
            "queued": counts["queued"],
            "failed": counts["failed"],
        },
        "chunks_done": counts["chunks_done"],
        "tokens_embedded": progress.tokens_embedded,
        "estimated_tokens_left": tokens_left,
        "price_per_million_tokens_usd": pricing.price_per_million,
        "cost_so_far_usd": pricing.cost(progress.tokens_embedded),
        "estimated_cost_left_usd": pricing.cost(tokens_left),
        "estimated_seconds_left": seconds_left(progress, left, pricing) if switching else 0.0,
    }
