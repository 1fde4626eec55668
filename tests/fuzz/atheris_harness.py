"""Coverage-guided fuzzing (atheris / libFuzzer) of the chunker and the importers, with the
same targets and checks as the hypothesis runs (`tests/fuzz/targets.py`).

    python -m tests.fuzz.atheris_harness chunker  -max_total_time=60 [libFuzzer flags]
    python -m tests.fuzz.atheris_harness importer -max_total_time=60 [libFuzzer flags]

The first bytes of each input pick the case: chunker — strategy, size, then the text as
UTF-8 with invalid bytes kept as lone surrogates (`surrogateescape`); importer — extension,
then the file bytes. The corpus starts from the real fixtures (markdown READMEs; the HTML,
DOCX and PDF fixtures), written to a temporary directory. A failing input makes libFuzzer
exit non-zero and save it under `-artifact_prefix`. Needs the optional `atheris` package
(`pip install -e '.[fuzz]'`); the pytest wrapper is `test_atheris.py` (slow).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["api.chunking", "api.importing"]):
    from api.chunking import STRATEGIES
    from api.importing import SUPPORTED_EXTENSIONS

from tests.fuzz import targets
from tests.fuzz.generators import corpus, fixture_files
from tests.fuzz.targets import FuzzStats, chunk_case, import_case

EXTENSIONS = sorted(SUPPORTED_EXTENSIONS)
SIZES = (10, 50, 300)
STATS = FuzzStats("atheris")


def chunker_input(data: bytes) -> None:
    """Chunk one input and check every invariant (exceptions are findings)."""
    if len(data) < 2:
        return
    text = data[2:].decode("utf-8", "surrogateescape")
    chunk_case(text, "Fuzz", STRATEGIES[data[0] % len(STRATEGIES)], SIZES[data[1] % 3], STATS)


def importer_input(data: bytes) -> None:
    """Convert one file; only ImportFileError may escape (enforced by `import_case`)."""
    if not data:
        return
    import_case("fuzz" + EXTENSIONS[data[0] % len(EXTENSIONS)], data[1:], STATS)


def seed_corpus(target: str, folder: Path) -> None:
    """Real documents, each prefixed with the selector bytes that route it correctly."""
    if target == "chunker":
        for i, doc in enumerate(corpus()):
            for j, start in enumerate(range(0, min(len(doc), 40_000), 2_000)):
                piece = doc[start : start + 2_000].encode("utf-8", "surrogatepass")
                (folder / f"md{i}_{j}").write_bytes(bytes([j % 3, i % 3]) + piece)
        return
    for name, data in fixture_files().items():
        ext = Path(name).suffix.lower()
        if ext in EXTENSIONS:
            (folder / name).write_bytes(bytes([EXTENSIONS.index(ext)]) + data)


def main() -> None:
    target, flags = sys.argv[1], sys.argv[2:]
    fuzz = {"chunker": chunker_input, "importer": importer_input}[target]
    targets.USE_ALARM = False  # libFuzzer's -timeout bounds each input instead
    limit = targets.CHUNK_LIMIT_S if target == "chunker" else targets.IMPORT_LIMIT_S
    with tempfile.TemporaryDirectory(prefix=f"atheris-{target}-") as tmp:
        seeds = Path(tmp)
        seed_corpus(target, seeds)
        max_len = "-max_len=4096" if target == "chunker" else "-max_len=160000"
        timeout = f"-timeout={int(limit)}"
        atheris.Setup([sys.argv[0], max_len, timeout, *flags, str(seeds)], fuzz)
        atheris.Fuzz()


if __name__ == "__main__":
    main()
