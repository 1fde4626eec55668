"""Chunking speed and structure quality: ours vs the floor, the peers and the regex baseline.

Documents: a generated realistic 1 000-line note, the CommonMark spec and the five Chroma
corpora (plain text). For each token size (cl100k, 300 and 200, zero overlap) and document,
in one process and interleaved, it reports the median time of every competitor (see
`benchmarks.chunking_peers`) as ratios: ours / floor (target ≤ 2), ours / each peer and
ours / the original design's regex chunker (information). It then checks the structure of
every chunker's output (`benchmarks.structure_quality`; target: zero defects for ours) and
our time per MB on the note and the spec replicated ×1, ×4, ×16 (linear scaling ⇒ a
constant time per MB).

Reproduce: `.venv/bin/python -m benchmarks.chunking` (`--quick` for fewer repeats,
`--no-write` to only print).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from benchmarks.chunking_peers import CHONKIE_EXACT, OURS_NEAREST
from benchmarks.common import (
    COMMONMARK_SPEC,
    Claim,
    Timing,
    chroma_dir,
    code_revision,
    machine_note,
    markdown_table,
    no_network,
    repeats_for,
    set_offline_env,
    time_interleaved,
    update_claims,
    update_section,
)
from benchmarks.sample_note import realistic_note
from benchmarks.structure_quality import StructureStats, check_structure, parse_document

SIZES = (300, 200)
SCALE_FACTORS = (1, 4, 16)
FLOOR, OURS, BASELINE = "floor (parse+encode)", "ours", "original regex"
COMMAND = "python -m benchmarks.chunking"
FLOOR_TARGET = 2.0  # ours / floor on every document


@dataclass(slots=True)
class DocResult:
    """Timings and structure stats of every competitor on one document at one size."""

    name: str
    size_bytes: int
    timings: dict[str, Timing] = field(default_factory=dict)
    structure: dict[str, StructureStats] = field(default_factory=dict)
    sizes_by_tokens: dict[str, bool] = field(default_factory=dict)


def load_documents() -> dict[str, str]:
    """The benchmark documents, in report order."""
    docs = {
        "note (1000 lines, generated)": realistic_note(1000),
        "commonmark_spec.md": COMMONMARK_SPEC.read_text("utf-8"),
    }
    for path in sorted((chroma_dir() / "corpora").glob("*.md")):
        docs[f"chroma/{path.name}"] = path.read_text(encoding="utf-8")
    return docs


def benchmark_size(
    docs: dict[str, str], max_tokens: int, repeats: int | None = None, include_ours: bool = True
) -> list[DocResult]:
    """Time (interleaved) and check the structure of every competitor on every document."""
    from benchmarks.chunking_peers import (
        OPENAI_MAX_INPUT_TOKENS,
        all_competitors,
        cl100k_encoding,
    )

    competitors = all_competitors(max_tokens, include_ours=include_ours)
    enc = cl100k_encoding()

    def count(text: str) -> int:
        return len(enc.encode_ordinary(text))

    ours_tok = None
    if include_ours:
        from api.tokenizer.encoders import tiktoken_tokenizer

        ours_tok = tiktoken_tokenizer("cl100k_base")
    results = []
    for name, text in docs.items():
        size = len(text.encode("utf-8"))
        res = DocResult(name, size)
        runs = {c.name: (lambda c=c, text=text: c.run(text)) for c in competitors}
        res.timings = time_interleaved(runs, repeats or repeats_for(size, 8_000_000, hi=25))
        parsed = parse_document(text)
        for comp in competitors:
            res.sizes_by_tokens[comp.name] = comp.sizes_by_tokens
            if comp.views is None:
                continue
            is_ours = comp.name == OURS
            res.structure[comp.name] = check_structure(
                parsed,
                comp.views(comp.run(text)),
                limit=max_tokens,
                count_tokens=count,
                input_limit=OPENAI_MAX_INPUT_TOKENS if is_ours else None,
                count_input_tokens=ours_tok.count if is_ours and ours_tok else None,
            )
        results.append(res)
    return results


def scaling(
    docs: dict[str, str],
    max_tokens: int = 300,
    repeats: int = 5,
    factors: tuple[int, ...] = SCALE_FACTORS,
) -> list[list[Any]]:
    """Ours and the floor on documents replicated ×1/×4/×16: time per MB should stay flat.

    All copies of one document are timed in the same interleaved rounds, and "vs ×1" is the
    median over rounds of (time ×f / time ×1 in the same round) / (MB ×f / MB ×1), so a load
    swing on the shared machine cancels instead of masquerading as non-linearity. The
    floor's own column shows how much of any drift is the machine's.
    """
    from benchmarks.chunking_peers import floor_competitor, ours_competitor

    ours, floor = ours_competitor(max_tokens), floor_competitor()
    rows: list[list[Any]] = []
    for name, text in docs.items():
        bigs = {f: "\n\n".join([text] * f) for f in factors}
        runs: dict[str, Any] = {}
        for f, big in bigs.items():
            runs[f"{OURS} ×{f}"] = lambda big=big: ours.run(big)
            runs[f"{FLOOR} ×{f}"] = lambda big=big: floor.run(big)
        t = time_interleaved(runs, repeats)
        first = factors[0]
        mb1 = len(bigs[first].encode("utf-8")) / 1e6
        for f, big in bigs.items():
            mb = len(big.encode("utf-8")) / 1e6
            ours_t, floor_t = t[f"{OURS} ×{f}"], t[f"{FLOOR} ×{f}"]
            rows.append(
                [
                    name,
                    f"×{f}",
                    f"{mb:.2f}",
                    f"{1000 * ours_t.median:.0f}",
                    f"{1000 * ours_t.median / mb:.0f}",
                    f"{ours_t.ratio_to(t[f'{OURS} ×{first}']) * mb1 / mb:.2f}",
                    f"{floor_t.ratio_to(t[f'{FLOOR} ×{first}']) * mb1 / mb:.2f}",
                    f"{ours_t.ratio_to(floor_t):.2f}",
                ]
            )
    return rows


def render_speed(results: list[DocResult], max_tokens: int) -> list[str]:
    """Ratio and absolute-time tables plus the verdict for one token size."""
    names = [n for n in results[0].timings if n not in (FLOOR, OURS)]
    ratio_rows, abs_rows = [], []
    for r in results:
        med = {n: t.median for n, t in r.timings.items()}
        ratio = {n: r.timings[OURS].ratio_to(t) for n, t in r.timings.items()}
        ratio_rows.append(
            [
                r.name,
                f"{r.size_bytes / 1024:.0f}",
                f"{ratio[FLOOR]:.2f}",
                *(f"{ratio[n]:.2f}" for n in names),
            ]
        )
        abs_rows.append([r.name, *(f"{1000 * med[n]:.1f}" for n in r.timings)])
    worst_floor = worst_floor_ratio(results)
    mark = {n: "" if results[0].sizes_by_tokens[n] else " †" for n in names}
    exact_line = []
    if CHONKIE_EXACT in names:
        mark[CHONKIE_EXACT] = " ‡"
        exact = [r.timings[OURS].ratio_to(r.timings[CHONKIE_EXACT]) for r in results]
        exact_line = [
            f"- ‡ {CHONKIE_EXACT} (chonkie's chunks, each then recounted so that its token "
            "count is exact, as ours are): ours faster on "
            f"{sum(x < 1 for x in exact)} of {len(exact)} documents, worst ratio "
            f"{max(exact):.2f}."
        ]
    return [
        f"### Speed at {max_tokens} cl100k tokens: ratios of our time, median over paired "
        "rounds (< 1: ours faster)",
        "",
        markdown_table(
            ["document", "KB", "ours / floor", *(f"ours / {n}{mark[n]}" for n in names)],
            ratio_rows,
        ),
        "",
        f"- ours / floor: worst {worst_floor:.2f} (target ≤ {FLOOR_TARGET:g}) → "
        f"**{'PASS' if worst_floor <= FLOOR_TARGET else 'FAIL'}**.",
        "- ours / each peer: information, not a target.",
        *_nearest_line(results),
        *exact_line,
        "",
        "Median milliseconds:",
        "",
        markdown_table(["document", *results[0].timings], abs_rows),
        "",
    ]


def worst_floor_ratio(results: list[DocResult]) -> float:
    """The highest ours / floor over the documents (paired rounds)."""
    return max(r.timings[OURS].ratio_to(r.timings[FLOOR]) for r in results)


def _nearest_line(results: list[DocResult]) -> list[str]:
    """What the topic-shift cut rule costs: ours against ours with nearest-boundary cuts."""
    if OURS_NEAREST not in results[0].timings:
        return []
    share = [r.timings[OURS].ratio_to(r.timings[OURS_NEAREST]) for r in results]
    floor = [r.timings[OURS_NEAREST].ratio_to(r.timings[FLOOR]) for r in results]
    return [
        f"- {OURS_NEAREST} (the cut-rule ablation of `benchmarks/chunk_quality.py`, not the "
        f"default): worst / floor {max(floor):.2f}; ours / it {min(share):.2f}–"
        f"{max(share):.2f} (what cutting where the text changes topic costs)."
    ]


_STRUCT_HEAD = [
    "chunks",
    "split fences",
    "split tables",
    "heading-only",
    "dropped chars",
    "over limit (max tok)",
    "embed text over input limit",
    "unlocated chars",
    "wrong token counts",
]


def _struct_cells(s: StructureStats, is_ours: bool) -> list[Any]:
    return [
        s.chunks,
        s.split_fences,
        s.split_tables,
        s.heading_only,
        s.dropped_chars,
        f"{s.over_limit} ({s.max_tokens})",
        s.over_input_limit if is_ours else "n/a",
        s.unlocated_chars,
        "n/a" if s.wrong_counts is None else s.wrong_counts,
    ]


def ours_is_clean(results: list[DocResult]) -> list[str]:
    """Every document where ours is not zero on the five structure counters."""
    bad = []
    for r in results:
        s = r.structure.get(OURS)
        if s and (
            s.split_fences
            or s.split_tables
            or s.heading_only
            or s.dropped_chars
            or s.over_limit
            or s.over_input_limit
        ):
            bad.append(r.name)
    return bad


def render_structure(results: list[DocResult], max_tokens: int, full: bool) -> list[str]:
    """Per doc × chunker (full) or totals per chunker across documents."""
    rows: list[list[Any]] = []
    if full:
        for r in results:
            rows += [[r.name, n, *_struct_cells(s, n == OURS)] for n, s in r.structure.items()]
        head = ["document", "chunker", *_STRUCT_HEAD]
    else:
        rows = [[n, *_struct_cells(total(results, n), n == OURS)] for n in results[0].structure]
        head = ["chunker (all documents)", *_STRUCT_HEAD]
    bad = ours_is_clean(results)
    return [
        f"### Structure quality at {max_tokens} cl100k tokens"
        + ("" if full else " (totals over the documents)"),
        "",
        markdown_table(head, rows),
        "",
        "- ours zero on split fences, split tables, heading-only, dropped chars, over limit → "
        + ("**PASS**." if not bad else f"**FAIL** on {', '.join(bad)}."),
        "- token counts reported wrong: "
        + "; ".join(f"{n} {w}" for n, w in _wrong_count_totals(results).items())
        + ".",
        "",
    ]


def total(results: list[DocResult], name: str) -> StructureStats:
    """One chunker's structure counters summed over the documents (max of the max)."""
    tot = StructureStats()
    for r in results:
        s = r.structure[name]
        for f in (
            "chunks",
            "split_fences",
            "split_tables",
            "heading_only",
            "dropped_chars",
            "over_limit",
            "over_input_limit",
            "unlocated_chars",
        ):
            setattr(tot, f, getattr(tot, f) + getattr(s, f))
        tot.max_tokens = max(tot.max_tokens, s.max_tokens)
        if s.wrong_counts is not None:
            tot.wrong_counts = (tot.wrong_counts or 0) + s.wrong_counts
    return tot


def _wrong_count_totals(results: list[DocResult]) -> dict[str, int]:
    """Chunks with a wrong reported token count, per chunker that reports counts."""
    totals: dict[str, int] = {}
    for r in results:
        for name, s in r.structure.items():
            if s.wrong_counts is not None:
                totals[name] = totals.get(name, 0) + s.wrong_counts
    return totals


LEGEND = """\
Competitors, all at the same cl100k capacity with zero overlap and run offline: *floor* =
one pyromark parse (GFM tables + YAML metadata, events iterated) + one tiktoken
`encode_ordinary` of the whole text; *ours* = `api.chunking.MarkdownChunker`
(cl100k tokenizer, 8191-token embedding input limit), full `chunk_note` incl. breadcrumbs
and hashes; *ours, nearest-boundary cuts* = the same with `cohesive_cuts=False` (each cut at
the boundary nearest its balanced position, not where the text changes topic: what that rule
costs; not a target); *original regex* = the Phase 2.1 algorithm of the original design
(`len // 4` estimate, `benchmarks/baseline_regex_chunker.py`); *langchain* =
MarkdownHeaderTextSplitter (h1–h6) then RecursiveCharacterTextSplitter.from_tiktoken_encoder
per section; *llamaindex* = MarkdownNodeParser († does not size by tokens: it splits on
headings only, so its "over limit" is by construction); *chonkie* = RecursiveChunker with a
tiktoken Encoding and its default rules (its "markdown" recipe is downloaded from the
Hugging Face hub, unavailable offline; its per-text token-count memo is cleared before every
timed run, since re-chunking one document would otherwise time a warm cache); ‡ *chonkie +
exact counts* = the same, then each chunk recounted with one `encode_ordinary` (what giving
chonkie's chunks the exact counts ours carry costs); *semantic-text-splitter* =
MarkdownSplitter.from_tiktoken_model. Structure: *split fences* = fenced code blocks spread
over > 1 chunk; *split tables* = tables spread over chunks where a chunk with rows lacks the
header row; *heading-only* = chunks with nothing but headings (or nothing); *dropped chars*
= non-whitespace source characters outside headings/front matter found in no chunk; *over
limit* = chunks whose own text costs > the limit in cl100k (max in parentheses); *unlocated
chars* = chunk characters not found in the source (text the chunker added, e.g. the regex
baseline's injected `# title`); *wrong token counts* = chunks whose own reported token count
differs from a cl100k recount of their text (n/a: the chunker reports none; chonkie adds up
the counts of the pieces it merges, which over-counts where a merge joins tokens, and the
original regex estimates `len // 4`). Chunks without offsets are located in order,
whitespace-insensitively."""


def render(
    by_size: dict[int, list[DocResult]],
    scale_rows: list[list[Any]],
    network: list[str],
    revision: str | None = None,
) -> str:
    """The `chunking` section (`revision`: the chunker's, taken at start)."""
    revision = revision or code_revision("api/chunking", "api/tokenizer")
    lines = [
        "## Chunking speed and structure",
        "",
        f"Reproduce: `{COMMAND}`",
        "",
        machine_note() + " Competitors run round-robin (3-25 rounds per document, fewer for "
        "big ones), GC disabled while timing. Ratios are the median over rounds of the two "
        "times taken in the same round (the machine's speed drifts between rounds); the "
        f"millisecond tables show plain medians. Chunker at {revision}.",
        "",
        LEGEND,
        "",
    ]
    for i, (size, results) in enumerate(by_size.items()):
        lines += render_speed(results, size)
        lines += render_structure(results, size, full=i == 0)
    if scale_rows:
        lines += [
            "### Linear scaling (ours, 300 tokens; documents replicated)",
            "",
            markdown_table(
                [
                    "document",
                    "copies",
                    "MB",
                    "ours ms",
                    "ours ms/MB",
                    "ours ms/MB vs ×1",
                    "floor ms/MB vs ×1",
                    "ours / floor",
                ],
                scale_rows,
            ),
            "",
        ]
    lines.append(f"Network attempts during the run: {len(network)}.")
    return "\n".join(lines)


def claims(by_size: dict[int, list[DocResult]]) -> list[Claim]:
    """The speed and structure rows of the claims table."""
    sizes = sorted(by_size, reverse=True)
    docs = len(by_size[sizes[0]])
    worst = {size: worst_floor_ratio(by_size[size]) for size in sizes}
    speed = Claim(
        "chunking_speed",
        "worst ours ÷ floor "
        + ", ".join(f"{worst[size]:.2f} at {size} tokens" for size in sizes)
        + f" ({docs} documents)",
        all(w <= FLOOR_TARGET for w in worst.values()),
    )
    bad = sorted({name for size in sizes for name in ours_is_clean(by_size[size])})
    wrong = sum(_wrong_count_totals(by_size[size]).get(OURS, 0) for size in sizes)
    ours = (
        f"ours: defects on {', '.join(bad)}"
        if bad
        else "ours: 0 split fences or tables, heading-only chunks, dropped characters, "
        "chunks over the limit"
    )
    at = "/".join(map(str, sizes))
    result = f"{ours}; {wrong} wrong token counts ({docs} documents at {at} tokens)"
    small = by_size[sizes[-1]]
    if BASELINE in small[0].structure:
        base = total(small, BASELINE)
        result += (
            f"; original regex at {sizes[-1]}: {base.split_fences} split fences, "
            f"{base.dropped_chars} dropped characters, {base.over_limit} chunks over the limit"
        )
    return [speed, Claim("chunking_structure", result, not bad)]


def main(argv: list[str] | None = None) -> None:
    """Run everything, print the report, update the area page and the claims unless
    --no-write."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats per document")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--no-write", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)

    set_offline_env()
    revision = code_revision("api/chunking", "api/tokenizer")  # what gets imported below
    docs = load_documents()
    with no_network() as attempts:
        by_size = {
            size: benchmark_size(docs, size, repeats=3 if args.quick else None)
            for size in args.sizes
        }
        scale_docs = {k: v for k, v in list(docs.items())[:2]}
        scale_rows = scaling(scale_docs, repeats=3 if args.quick else 5)
    report = render(by_size, scale_rows, attempts, revision)
    print(report)
    if not args.no_write:
        update_section("chunking", report)
        update_claims(claims(by_size), COMMAND)


if __name__ == "__main__":
    main()
