"""Retrieval: hybrid chunk search (vector + BM25), fusion, grouping to notes.

Pure parts: `types`, `fusion`, `grouping`, `note_text`, `atlas_pipelines`; the in-process
index is `local/`; `service` runs a search, `backends` query the local index or Atlas.
"""
