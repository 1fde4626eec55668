"""Backfilling chunks for existing notes (`autonote migrate`).

The migration selects notes that are not indexed with the configured chunker and embedding
model, enqueues them in bounded batches without clobbering concurrent edits, and drives each
through the API's own `Reconciler` (never a copy of the indexing code). Modules:
`selection` (pure queries and verdicts), `queries` (database access), `estimate` (dry run),
`limiter` (embedding rate limits), `runner` (the run), `progress` (bar, log lines, tables),
`command` (the CLI).
"""
