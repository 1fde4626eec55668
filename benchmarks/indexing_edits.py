"""(a) Incremental re-embedding for a realistic edit mix, through the real API and reconciler.

For each seed a 40-section note is created and indexed, then the six edits of
`benchmarks.indexing_notes.EDIT_MIX` are applied one after another with `PATCH`; after each
the queue is drained and the note's `last_index_stats` (what the reconciler says it
embedded) is compared with `edit_cost()` (what the chunker + the model's tokenizer say a
correct incremental indexer must embed, given every hash embedded so far in this database).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from api.config import Settings
from benchmarks.indexing_notes import EDIT_MIX, EditCost, Note, edit_cost, generate_note
from benchmarks.service_harness import InProcessApp, in_process_app


@dataclass(frozen=True, slots=True)
class EditRow:
    """One edit: the reconciler's own stats next to the independent count."""

    seed: int
    edit: str
    detail: str
    stats: dict[str, Any]  # last_index_stats after the edit
    expected: EditCost  # independent count

    @property
    def chunk_fraction(self) -> float:
        total = self.stats["chunks"]
        return self.stats["embedded"] / total if total else 0.0

    @property
    def token_fraction(self) -> float:
        full = self.expected.tokens_total
        return self.stats["tokens_embedded"] / full if full else 0.0

    @property
    def agrees(self) -> bool:
        """Stats equal the independent count (chunks, embedded chunks and tokens)."""
        return (
            self.stats["chunks"] == self.expected.chunks_total
            and self.stats["embedded"] == self.expected.chunks_new
            and self.stats["tokens_embedded"] == self.expected.tokens_new
        )


async def _index(running: InProcessApp, headers: dict[str, str], note_id: str) -> dict[str, Any]:
    await running.container.indexing.workers.drain(timeout_s=600)
    note = (await running.client.get(f"/v1/notes/{note_id}", headers=headers)).json()
    if note["index_status"] != "indexed" or note["indexed_version"] != note["version"]:
        raise RuntimeError(f"note not indexed after draining: {note['index_status']}")
    return note


async def run_edit_mix(settings: Settings, seeds: list[int], n_sections: int = 40) -> list[EditRow]:
    """Apply the edit mix to one note per seed; one row per edit."""
    rows: list[EditRow] = []
    async with in_process_app(settings) as running:
        headers = await running.new_user()
        chunker = running.container.chunker
        count = running.container.embedder.tokenizer.count_batch
        seen: set[str] = set()
        for seed in seeds:
            note: Note = generate_note(n_sections, seed)
            resp = await running.client.post(
                "/v1/notes",
                json={"title": note.title, "content_md": note.render()},
                headers=headers,
            )
            resp.raise_for_status()
            note_id = resp.json()["id"]
            await _index(running, headers, note_id)
            seen |= {c.content_hash for c in chunker.chunk_note(note.render(), note.title)}
            rng = random.Random(seed)
            for name, edit in EDIT_MIX:
                note, detail = edit(note, rng)
                content = note.render()
                chunks = chunker.chunk_note(content, note.title)
                expected = edit_cost(chunks, seen, count)
                resp = await running.client.patch(
                    f"/v1/notes/{note_id}", json={"content_md": content}, headers=headers
                )
                resp.raise_for_status()
                indexed = await _index(running, headers, note_id)
                rows.append(EditRow(seed, name, detail, indexed["last_index_stats"], expected))
                seen |= {c.content_hash for c in chunks}
    return rows


def summarize_edits(rows: list[EditRow]) -> dict[str, dict[str, float]]:
    """Per edit type: mean fraction of chunks and tokens embedded vs a full re-embed."""
    out: dict[str, dict[str, float]] = {}
    for name, _ in EDIT_MIX:
        mine = [r for r in rows if r.edit == name]
        if not mine:
            continue
        out[name] = {
            "edits": len(mine),
            "chunks": sum(r.chunk_fraction for r in mine) / len(mine),
            "tokens": sum(r.token_fraction for r in mine) / len(mine),
            "embedded": sum(r.stats["embedded"] for r in mine) / len(mine),
            "of_chunks": sum(r.stats["chunks"] for r in mine) / len(mine),
            "agree": sum(r.agrees for r in mine),
        }
    return out
