"""Backfilling chunks for existing notes (`autonote migrate`).

The migration selects notes that are not indexed with the configured chunker and embedding
model, enqueues them in bounded batches without clobbering concurrent edits, and drives each
through the API's own `Reconciler` (never a copy of the indexing code). Modules:
`selection` (pure queries), `repository` (database access), `drive` (one note's loop),
`runner` (the run), `estimate` (dry run), `limiter` (embedding rate limits), `progress`
(bar, log lines, tables), `types` (results and totals), `execute` (a run from the CLI's
options; the CLI is `api.cli.migrate`).
"""
