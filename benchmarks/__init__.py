"""Reproducible performance and quality measurements behind the claims of BENCHMARKS.md.

Run a benchmark as a module from the repository root, e.g. `python -m benchmarks.chunking`;
`make bench` runs every claim's (`benchmarks.run_all`). Results go to the area pages under
docs/benchmarks/ and to the claims table. Shared helpers (timing, report sections, claim
rows, data locations) live in `benchmarks.common`; one-off studies in
`benchmarks.investigations`.
"""
