"""A comparison of full-text engines for the local backend (a script, not a test).

Run: `python -m tests.retrieval.fts_engine_comparison {fts5|tantivy|bm25s}` — tantivy and
bm25s are NOT project dependencies; install them in a scratch virtualenv to rerun
(`pip install numpy tantivy bm25s`). Results are in docs/decisions/0002-sqlite-fts5.md.

Corpus: N (default 100 000) chunks of a 6-word heading and a 110-word body drawn Zipf-like
(s = 1.07) from 20 000 English words of the MiniLM vocabulary the local embedder ships; 200
OR-queries of 2–6 words of rank 30–5000; top 50. Measures build time, query P50/P95, the
cost of replacing one note's 10 chunks so the change is visible to searches, and RSS growth.
"""

from __future__ import annotations

import json
import os
import random
import resource
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

N = int(os.environ.get("N", "100000"))


def _vocabulary() -> list[str]:
    from connectors.embeddings.local import default_tokenizer_path

    path = default_tokenizer_path()
    vocab = json.loads(path.read_text())["model"]["vocab"]
    words = [w for w in vocab if w.isascii() and w.isalpha() and len(w) >= 3]
    random.Random(7).shuffle(words)
    return words[:20000]


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(engine: str) -> None:
    vocab = _vocabulary()
    p = 1 / np.arange(1, len(vocab) + 1) ** 1.07
    p /= p.sum()
    rng = np.random.default_rng(7)

    def text(n: int) -> str:
        return " ".join(vocab[i] for i in rng.choice(len(vocab), n, p=p))

    docs = [(i, text(6), text(110)) for i in range(N)]
    qrng = random.Random(7)
    queries = [
        " ".join(vocab[qrng.randint(30, 5000)] for _ in range(qrng.randint(2, 6)))
        for _ in range(200)
    ]
    base = _rss_mb()
    search: Callable[[str], object]
    replace: Callable[[int], None]
    if engine == "fts5":
        db = sqlite3.connect(":memory:")
        db.execute(
            "CREATE VIRTUAL TABLE t USING fts5(head, body, content='', "
            "tokenize='porter unicode61 remove_diacritics 2')"
        )
        start = time.perf_counter()
        with db:
            db.executemany("INSERT INTO t(rowid, head, body) VALUES (?, ?, ?)", docs)
        build = time.perf_counter() - start

        def search(q: str) -> object:
            match = " OR ".join(f'"{w}"' for w in q.split())
            sql = "SELECT rowid, rank FROM t WHERE t MATCH ? ORDER BY rank LIMIT 50"
            return db.execute(sql, (match,)).fetchall()

        def replace(first: int) -> None:
            with db:
                for j in range(first, first + 10):
                    _, head, body = docs[j]
                    db.execute(
                        "INSERT INTO t(t, rowid, head, body) VALUES ('delete', ?, ?, ?)",
                        (j, head, body),
                    )
                    db.execute("INSERT INTO t(rowid, head, body) VALUES (?, ?, ?)", (j, head, body))

    elif engine == "tantivy":
        import tantivy

        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("id", stored=True, indexed=True, fast=True)
        builder.add_text_field("head", stored=False, tokenizer_name="en_stem")
        builder.add_text_field("body", stored=False, tokenizer_name="en_stem")
        index = tantivy.Index(builder.build())
        writer = index.writer(heap_size=100_000_000, num_threads=1)
        start = time.perf_counter()
        for i, head, body in docs:
            writer.add_document(tantivy.Document(id=i, head=head, body=body))
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        build = time.perf_counter() - start
        writer = index.writer(heap_size=50_000_000, num_threads=1)

        def search(q: str) -> object:
            return index.searcher().search(index.parse_query(q, ["head", "body"]), 50).hits

        def replace(first: int) -> None:
            for j in range(first, first + 10):
                _, head, body = docs[j]
                writer.delete_documents("id", j)
                writer.add_document(tantivy.Document(id=j, head=head, body=body))
            writer.commit()
            index.reload()

    elif engine == "bm25s":
        import bm25s

        corpus = [f"{head} {body}" for _, head, body in docs]
        start = time.perf_counter()
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False))
        build = time.perf_counter() - start

        def search(q: str) -> object:
            tokens = bm25s.tokenize([q], stopwords="en", show_progress=False)
            return retriever.retrieve(tokens, k=50, show_progress=False)

        def replace(first: int) -> None:  # no incremental update: rebuild everything
            fresh = bm25s.BM25()
            fresh.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False))

    else:
        raise SystemExit(f"unknown engine {engine!r}")

    for q in queries[:5]:
        search(q)
    latencies = []
    for q in queries:
        start = time.perf_counter()
        search(q)
        latencies.append(time.perf_counter() - start)
    updates = []
    for k in range(3 if engine == "bm25s" else 30):
        start = time.perf_counter()
        replace(k * 10)
        updates.append(time.perf_counter() - start)
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1e3
    p95 = latencies[int(len(latencies) * 0.95)] * 1e3
    print(
        f"{engine}: N={N} build={build:.1f}s query p50={p50:.1f}ms p95={p95:.1f}ms "
        f"replace-10-chunks median={statistics.median(updates) * 1e3:.1f}ms "
        f"rss+={_rss_mb() - base:.0f}MB load={os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "fts5")
