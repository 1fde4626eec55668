"""Would a faster cl100k encoder make our chunker beat chonkie? (the decision behind
README's "Tokens" choice, measured).

The chunker's largest single cost is one tiktoken pass over the note (see the chunking
benchmark). `rs-bpe` and `bpe-openai` wrap GitHub's Rust `bpe` crate and claim faster
cl100k encoding with the same token ids. For every document of the chunking benchmark this
script checks, in one process and interleaved:

1. the ids are identical to tiktoken's (`encode_ordinary`);
2. encode time of each backend ÷ tiktoken's (median over paired rounds);
3. our full `chunk_note` at 300 tokens with that backend behind the chunker's tokenizer,
   ÷ chonkie RecursiveChunker (tiktoken) in the same rounds; and ours (tiktoken) ÷ chonkie.

The backends are not dependencies of Autonote (both are 0.1.x alpha releases); install them
only to run this: `.venv/bin/pip install rs-bpe==0.1.0 bpe-openai==0.1.4`. Without them it
only prints (`--no-write`).

Reproduce: `.venv/bin/python -m benchmarks.investigations.tokenizer_backends` (`--no-write`
to only print; the report goes to benchmarks/.data/investigations.md).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

from api.chunking import MarkdownChunker
from api.tokenizer.encoders import TiktokenTokenizer
from benchmarks.chunking import load_documents
from benchmarks.chunking_peers import chonkie_competitor, cl100k_encoding
from benchmarks.common import (
    code_revision,
    machine_note,
    markdown_table,
    no_network,
    repeats_for,
    set_offline_env,
    time_interleaved,
    update_section,
)

MAX_TOKENS = 300
TIKTOKEN = "tiktoken"


class _BackendTokenizer(TiktokenTokenizer):
    """The chunker's cl100k tokenizer with another encoder behind encode and count.

    Same `name` (so the chunker's exact-count shortcuts apply) and the same vocabulary
    (`byte_lengths` from tiktoken's ranks, valid because the ids are checked identical)."""

    def __init__(self, encode: Callable[[str], list[int]]) -> None:
        super().__init__(cl100k_encoding())
        self._fast = encode

    def count(self, text: str) -> int:
        return len(self._fast(text))

    def count_batch(self, texts: list[str]) -> list[int]:
        return [len(self._fast(t)) for t in texts]

    def encode(self, text: str) -> list[int]:
        return list(self._fast(text))

    def encode_array(self, text: str) -> np.ndarray:
        return np.asarray(self._fast(text), dtype=np.int64)


def load_backends() -> tuple[dict[str, Callable[[str], list[int]]], list[str]]:
    """Encode functions of the installed backends (tiktoken first), and what is missing."""
    backends: dict[str, Callable[[str], list[int]]] = {TIKTOKEN: cl100k_encoding().encode_ordinary}
    missing: list[str] = []
    try:
        # The package's `openai` attribute (the compiled module), not its rs_bpe/openai.py.
        rs_bpe = importlib.import_module("rs_bpe")
        backends["rs-bpe 0.1.0"] = rs_bpe.openai.cl100k_base().encode
    except ImportError:
        missing.append("rs-bpe")
    try:
        bpe_openai = importlib.import_module("bpe_openai")
        backends["bpe-openai 0.1.4"] = bpe_openai.get_encoding("cl100k_base").encode
    except ImportError:
        missing.append("bpe-openai")
    return backends, missing


def measure(docs: dict[str, str], quick: bool) -> tuple[list[str], list[list[Any]]]:
    """One row per document: ids identical?, encode ratios, ours ÷ chonkie per backend."""
    backends, _ = load_backends()
    others = [b for b in backends if b != TIKTOKEN]
    chunkers = {
        name: MarkdownChunker(
            max_chunk_tokens=MAX_TOKENS,
            tokenizer=None if name == TIKTOKEN else _BackendTokenizer(encode),
        )
        for name, encode in backends.items()
    }
    chonkie = chonkie_competitor(MAX_TOKENS)
    headers = ["document", "KB", "ids identical"]
    headers += [f"encode {b} ÷ tiktoken" for b in others]
    headers += [f"ours ({b}) ÷ chonkie" for b in backends]
    rows: list[list[Any]] = []
    for doc, text in docs.items():
        reference = list(backends[TIKTOKEN](text))
        same = all(list(backends[b](text)) == reference for b in others)
        # Every backend's chunks must be the same chunks, or the timing compares apples
        # with pears.
        expected = [c.to_dict() for c in chunkers[TIKTOKEN].chunk_note(text, "T")]
        for b in others:
            if [c.to_dict() for c in chunkers[b].chunk_note(text, "T")] != expected:
                raise SystemExit(f"{doc}: chunks differ with {b}")
        runs: dict[str, Callable[[], Any]] = {"chonkie": lambda t=text: chonkie.run(t)}
        for b, encode in backends.items():
            runs[f"encode {b}"] = lambda t=text, e=encode: e(t)
            runs[f"ours {b}"] = lambda t=text, c=chunkers[b]: c.chunk_note(t, "T")
        repeats = 3 if quick else repeats_for(len(text.encode("utf-8")), hi=21)
        timings = time_interleaved(runs, repeats)
        row: list[Any] = [doc, round(len(text.encode("utf-8")) / 1024), "yes" if same else "NO"]
        row += [
            f"{timings[f'encode {b}'].ratio_to(timings[f'encode {TIKTOKEN}']):.2f}" for b in others
        ]
        row += [f"{timings[f'ours {b}'].ratio_to(timings['chonkie']):.2f}" for b in backends]
        rows.append(row)
        print(" | ".join(map(str, row)), flush=True)
    return headers, rows


def render(headers: list[str], rows: list[list[Any]], missing: list[str], revision: str) -> str:
    """The investigation's report."""
    lines = [
        "## Tokenizer backends: would a faster cl100k encoder beat chonkie?",
        "",
        "Reproduce: `.venv/bin/pip install rs-bpe==0.1.0 bpe-openai==0.1.4` then "
        "`.venv/bin/python -m benchmarks.investigations.tokenizer_backends` (neither package "
        "is an Autonote dependency).",
        "",
        f"{machine_note()} Chunker at {revision}. Documents of the chunking benchmark; "
        f"{MAX_TOKENS} cl100k tokens; ratios are medians over paired, interleaved rounds "
        "(< 1: the left side is faster). *ours (X)*: our full `chunk_note` with backend X "
        "behind the chunker's tokenizer (same chunks, checked); chonkie RecursiveChunker uses "
        "tiktoken, as in the chunking benchmark.",
        "",
        markdown_table(headers, rows),
        "",
    ]
    if missing:
        lines.append(f"Not installed, not measured: {', '.join(missing)}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run, print, and write the report unless --no-write."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats per document")
    parser.add_argument("--no-write", action="store_true", help="print, do not write")
    args = parser.parse_args(argv)
    set_offline_env()
    revision = code_revision("api/chunking", "api/tokenizer")
    _, missing = load_backends()
    if missing and not args.no_write:
        # A table without the backends would overwrite the recorded comparison with nothing.
        raise SystemExit(f"not installed: {', '.join(missing)} (see the module docstring)")
    docs = load_documents()
    with no_network() as attempts:
        headers, rows = measure(docs, args.quick)
    if attempts:
        raise SystemExit(f"network attempts: {attempts}")
    report = render(headers, rows, missing, revision)
    print(report)
    if not args.no_write:
        update_section("tokenizer_backends", report)


if __name__ == "__main__":
    main()
