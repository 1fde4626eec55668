"""Retrieval: hybrid chunk search (vector + BM25), fusion, grouping to notes, Atlas pipelines.

Pure/in-process parts live in `models`, `fusion`, `grouping`, `local_index` (with
`local_vectors` and `local_fulltext`) and `atlas_pipelines`; wiring to MongoDB, the indexer
and HTTP routes lives beside them.
"""
