"""Retrieval: hybrid chunk search (vector + BM25), fusion, grouping to notes.

`service` runs a search through its steps: `query_embedding`, `backends` (the in-process
index in `local/`, or Atlas with `atlas_pipelines`), `fusion`, `recheck`, `grouping` and
`note_text`; `note_level` when chunking is off.
"""
