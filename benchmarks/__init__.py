"""Reproducible performance and quality measurements; results go to BENCHMARKS.md.

Run a benchmark as a module from the repository root, e.g. `python -m benchmarks.chunking`.
Shared helpers (timing, report sections, data locations) live in `benchmarks.common`.
"""
