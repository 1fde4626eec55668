"""One-off studies that back no claim of BENCHMARKS.md; not run by `make bench`.

Each runs as `python -m benchmarks.investigations.<name>` and writes its full report to
benchmarks/.data/investigations.md (not committed); the short write-ups are in
docs/benchmarks/investigations.md.
"""
