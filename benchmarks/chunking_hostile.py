"""What a hostile note costs the chunker, next to an ordinary note of the same size.

A note may be as large as AUTONOTE_MAX_NOTE_BYTES (2 MB by default) and its author chooses
its shape. Each shape below is chunked in a fresh child process (so the peak memory is its
own), with each of the two tokenizers the product sizes chunks with: tiktoken cl100k_base
(OpenAI embeddings) and the local model's MiniLM word pieces (the default). The baseline,
measured in the same run with the same tokenizer, is ordinary markdown of the same size
(the CommonMark spec repeated). Reported: seconds and the growth of the child's peak RSS
while chunking (after the text, the chunker and the tokenizer are loaded), each also as a
ratio to the baseline.

Reproduce: `.venv/bin/python -m benchmarks.chunking_hostile` (`--size 500000` for a quicker
run, `--no-write` to only print).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable

from benchmarks.common import (
    COMMONMARK_SPEC,
    Claim,
    code_revision,
    machine_note,
    markdown_table,
    set_offline_env,
    update_claims,
    update_section,
)

BASELINE = "ordinary markdown (CommonMark spec, repeated)"
COMMAND = "python -m benchmarks.chunking_hostile"
TOKENIZERS = ("cl100k", "minilm")
MAX_TOKENS = 200


def _spec(n: int) -> str:
    text = COMMONMARK_SPEC.read_text("utf-8")
    return (text * (n // len(text) + 1))[:n]


# name -> text of about n bytes
SHAPES: dict[str, Callable[[int], str]] = {
    BASELINE: _spec,
    "nested quotes `>` x n": lambda n: ">" * n,
    "bare headings `#\\n`": lambda n: "#\n" * (n // 2),
    "one-word headings `# a\\n`": lambda n: "# a\n" * (n // 4),
    "one-line paragraphs `a\\n\\n`": lambda n: "a\n\n" * (n // 3),
    "one-line paragraphs, bare CR `a\\r\\r`": lambda n: "a\r\r" * (n // 3),
    "list items `- a\\n`": lambda n: "- a\n" * (n // 4),
    "backticks": lambda n: "`" * n,
    "asterisks": lambda n: "*" * n,
    "brackets": lambda n: "[" * n,
    "table rows": lambda n: "| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * (n // 10),
    "one whitespace run (n-1 spaces) + x": lambda n: " " * (n - 1) + "x",
    "CJK, no punctuation": lambda n: "中文" * (n // 6),
    "one word": lambda n: "a" * n,
    "NUL lines": lambda n: "\x00\n" * (n // 2),
    "empty fences": lambda n: "```\n```\n" * (n // 8),
    "pasted images, 4 KB each (data: URIs)": lambda n: (
        ("![i](data:image/png;base64," + "QUJD" * 1000 + ")\n\n") * (n // 4030)
    ),
    "`data:;a=` runs, one `;base64,`": lambda n: "data:;a=" * (n // 8) + ";base64," + "A" * 300,
}


def _tokenizer(name: str) -> tuple[object, int | None]:
    from api.tokenizer.encoders import HuggingFaceTokenizer, tiktoken_tokenizer

    if name == "cl100k":
        return tiktoken_tokenizer("cl100k_base"), None
    from connectors.embeddings.local import MODEL_ID, _load_tokenizer, default_tokenizer_path

    return HuggingFaceTokenizer(_load_tokenizer(default_tokenizer_path()), MODEL_ID), 254


def child(shape: str, tokenizer_name: str, size: int) -> dict[str, float]:
    """Chunk one shape in this process; the numbers the parent reads (JSON on stdout)."""
    from api.chunking import MarkdownChunker

    text = SHAPES[shape](size)
    tokenizer, max_input = _tokenizer(tokenizer_name)
    chunker = MarkdownChunker(
        max_chunk_tokens=MAX_TOKENS,
        tokenizer=tokenizer,  # type: ignore[arg-type]
        max_input_tokens=max_input,
    )
    chunker.chunk_note("# warm\n\nup " * 50, "T")  # lazy imports and tables
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    chunks = chunker.chunk_note(text, "Hostile")
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "seconds": seconds,
        "growth_mb": (after - before) / 1024,
        "chunks": len(chunks),
        "bytes": len(text.encode("utf-8")),
    }


def measure(size: int, shapes: list[str]) -> dict[tuple[str, str], dict[str, float]]:
    """Every (shape, tokenizer), each in a fresh child process."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for tokenizer_name in TOKENIZERS:
        for shape in shapes:
            proc = subprocess.run(
                [sys.executable, "-m", "benchmarks.chunking_hostile", "--child", shape,
                 tokenizer_name, str(size)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            out[(shape, tokenizer_name)] = json.loads(proc.stdout.strip().splitlines()[-1])
            print(shape, tokenizer_name, out[(shape, tokenizer_name)], flush=True)
    return out


Results = dict[tuple[str, str], dict[str, float]]  # (shape, tokenizer) → figures


def render(results: Results, size: int, revision: str) -> str:
    """The `chunking_hostile` section."""
    shapes = list(dict.fromkeys(shape for shape, _ in results))
    headers = ["note shape", "MB"]
    for tok in TOKENIZERS:
        headers += [f"{tok}: chunks", f"{tok}: s", f"{tok}: s ÷ baseline",
                    f"{tok}: peak +MB", f"{tok}: +MB ÷ baseline"]  # fmt: skip
    rows = []
    for shape in shapes:
        row: list[object] = [shape, f"{results[(shape, TOKENIZERS[0])]['bytes'] / 1e6:.2f}"]
        for tok in TOKENIZERS:
            r, base = results[(shape, tok)], results[(BASELINE, tok)]
            row += [
                int(r["chunks"]),
                f"{r['seconds']:.2f}",
                f"{r['seconds'] / base['seconds']:.1f}",
                f"{r['growth_mb']:.0f}",
                f"{r['growth_mb'] / max(base['growth_mb'], 1.0):.1f}",
            ]
        rows.append(row)
    worst = {
        tok: (
            max(results[(s, tok)]["seconds"] for s in shapes),
            max(results[(s, tok)]["growth_mb"] for s in shapes),
        )
        for tok in TOKENIZERS
    }
    summary = "; ".join(
        f"{tok}: slowest {sec:.1f} s, largest peak growth {mb:.0f} MB"
        for tok, (sec, mb) in worst.items()
    )
    return "\n".join([
        "## Chunking hostile notes: time and memory per note",
        "",
        f"Reproduce: `{COMMAND}`.",
        "",
        f"{machine_note()} Chunker at {revision}. Each shape is about {size / 1e6:.1f} MB "
        f"(the default note limit is 2 MB), chunked at {MAX_TOKENS} tokens in a fresh child "
        "process; *peak +MB* is the growth of the child's peak RSS while chunking (text, "
        "chunker and tokenizer already loaded); ratios are to the ordinary-markdown baseline "
        "of the same size and tokenizer, measured in the same run.",
        "",
        markdown_table(headers, rows),
        "",
        f"- Worst case: {summary}.",
    ])  # fmt: skip


def claims(results: Results, size: int) -> list[Claim]:
    """The claims-table row: the worst time and memory, and the worst ratios to the
    ordinary note of the same size (no target)."""
    shapes = list(dict.fromkeys(shape for shape, _ in results))
    worst, time_ratio, mb_ratio = [], 0.0, 0.0
    for tok in TOKENIZERS:
        base = results[(BASELINE, tok)]
        runs = [results[(s, tok)] for s in shapes]
        worst.append(
            f"{max(r['seconds'] for r in runs):.1f} s and "
            f"{max(r['growth_mb'] for r in runs):.0f} MB peak growth ({tok})"
        )
        time_ratio = max(time_ratio, *(r["seconds"] / base["seconds"] for r in runs))
        growth = max(base["growth_mb"], 1.0)
        mb_ratio = max(mb_ratio, *(r["growth_mb"] / growth for r in runs))
    return [
        Claim(
            "chunking_hostile",
            f"{size / 1e6:g} MB notes of {len(shapes) - 1} hostile shapes: slowest "
            + ", ".join(worst)
            + f"; at most {time_ratio:.1f}× the time and {mb_ratio:.1f}× the memory of "
            "ordinary markdown of the same size",
        )
    ]


def main(argv: list[str] | None = None) -> None:
    """Run every shape (or be one child), print, and update the area page and the claim."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", nargs=3, metavar=("SHAPE", "TOKENIZER", "SIZE"))
    parser.add_argument("--size", type=int, default=2_000_000, help="bytes per note")
    parser.add_argument("--shapes", nargs="*", help="only these shapes (and the baseline)")
    parser.add_argument("--no-write", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    set_offline_env()
    if args.child:
        shape, tokenizer_name, size = args.child
        print(json.dumps(child(shape, tokenizer_name, int(size))))
        return
    shapes = [BASELINE, *(s for s in (args.shapes or SHAPES) if s != BASELINE)]
    unknown = set(shapes) - set(SHAPES)
    if unknown:
        raise SystemExit(f"unknown shapes: {sorted(unknown)}")
    results = measure(args.size, shapes)
    report = render(results, args.size, code_revision("api/chunking", "api/tokenizer"))
    print(report)
    if not args.no_write:
        update_section("chunking_hostile", report)
        update_claims(claims(results, args.size), COMMAND)


if __name__ == "__main__":
    main()
