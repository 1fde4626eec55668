"""BM25 full-text search for the local backend: SQLite FTS5, one private table per author
(docs/decisions/0002-sqlite-fts5.md).

The table is contentless: the text lives once, in the index's `ChunkData`, and rows are
deleted with FTS5's `'delete'` command fed the exact indexed values. Row ids are
`note_ord << ROWID_BITS | position`, so user filters sit in the SQL before `LIMIT k`.
Queries are never FTS5 syntax: word pieces, stop words dropped, each quoted and OR-ed. CJK
characters are indexed one by one and queried as overlapping character pairs; full- and
half-width forms are folded in text and queries.

Not thread-safe by itself: `LocalIndex` serialises every call on the author's lock.
"""

from __future__ import annotations

import json
import re
import sqlite3
import unicodedata
from collections.abc import Sequence
from itertools import pairwise

from api.chunking.data_uri import elide_data_uris
from api.chunking.obsidian import readable_links
from api.retrieval.types import ChunkData

ROWID_BITS = 24  # up to 16.7M chunks per note; note ordinals get the remaining 39 bits
MAX_QUERY_CHARS = 4096
MAX_QUERY_TERMS = 32
# CJK character pairs are counted apart: a question of one unspaced sentence yields one
# pair per character, which MAX_QUERY_TERMS would cut before its last words.
MAX_CJK_PAIRS = 96
TOKENIZER = "porter unicode61 remove_diacritics 2"
# Han (with extensions and compatibility ideographs), kana (with half-width katakana) and
# Hangul syllables: scripts whose words are not separated by spaces.
# Also the ideographic iteration and closing marks and number zero (々 〆 〇 〻: 様々, 人々).
CJK_CHAR = re.compile(
    "[\u3005-\u3007\u303b\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f]"
)

# Unicode's Halfwidth and Fullwidth Forms block (folded by `_fold_width`).
_WIDTH_FORMS = re.compile("[\uff01-\uffef]+")

# Fixed cost of one SQLite connection with an FTS5 table (about 75 KB).
CONNECTION_OVERHEAD_BYTES = 80_000

# English stop words (the NLTK list, minus contractions' fragments handled by splitting).
STOPWORDS: frozenset[str] = frozenset(
    """a about above after again against ain all am an and any are aren as at be because
    been before being below between both but by can couldn d did didn do does doesn doing
    don down during each few for from further had hadn has hasn have haven having he her
    here hers herself him himself his how i if in into is isn it its itself just ll m ma me
    mightn more most mustn my myself needn no nor not now o of off on once only or other our
    ours ourselves out over own re s same shan she should shouldn so some such t than that
    the their theirs them themselves then there these they this those through to too under
    until up ve very was wasn we were weren what when where which while who whom why will
    with won wouldn y you your yours yourself yourselves""".split()
)


def _is_word_char(ch: str) -> bool:
    # Letters, digits, combining marks and private-use characters: a superset of what the
    # unicode61 tokenizer keeps (L*, N*, Co). FTS5 re-tokenises each quoted piece itself, so
    # a piece it splits further becomes a phrase, which matches the same indexed tokens.
    if ch.isalnum():
        return True
    category = unicodedata.category(ch)
    return category[0] == "M" or category == "Co"


def _fold_width(text: str) -> str:
    # Full- and half-width forms (Ｗｉ-Ｆｉ, ２０２６, ｻｰﾊﾞｰ) as their usual ones, like the
    # width filter of Lucene's CJK analyzer; text and queries alike. Only that block: NFKC
    # on everything would glue "™" onto its word as "TM" ("Core™" → "coretm").
    return _WIDTH_FORMS.sub(_nfkc, text) if _WIDTH_FORMS.search(text) else text


def _nfkc(match: re.Match[str]) -> str:
    return unicodedata.normalize("NFKC", match[0])


def indexed_text(text: str) -> str:
    """`text` as the index tokenises it: widths folded, every CJK character apart."""
    text = _fold_width(text)
    return CJK_CHAR.sub(r" \g<0> ", text) if CJK_CHAR.search(text) else text


def indexed_content(content_md: str) -> str:
    """A chunk's text as the index takes it: `indexed_text` without the base64 of pasted
    images (300 KB of random "words" made their section's BM25 length, and so its rank for
    every real word in it, hopeless), wikilinks as their readable text (a link's target
    path is not the note's words). Deterministic: deleting a row re-derives it."""
    return indexed_text(readable_links(elide_data_uris(content_md)))


def indexed_heading(chunk: ChunkData) -> str:
    """A chunk's breadcrumb as the index takes it, with the note's aliases (other names of
    the note are found as its title is)."""
    heading = " ".join([chunk.section_path, *chunk.aliases])
    return indexed_text(heading)


def _split_cjk(piece: str) -> list[str]:
    """A word piece's terms: CJK runs as their overlapping character pairs (one character
    alone as itself), written as two-token phrases ("東 京"); the rest as it is."""
    if not CJK_CHAR.search(piece):
        return [piece]
    out: list[str] = []
    for run in re.findall(f"{CJK_CHAR.pattern}+|(?:(?!{CJK_CHAR.pattern}).)+", piece):
        if not CJK_CHAR.match(run) or len(run) == 1:
            out.append(run)
        else:
            out.extend(f"{a} {b}" for a, b in pairwise(run))
    return out


def query_terms(text: str) -> list[str]:
    """The search terms of user text: word pieces, widths folded and lower-cased, without
    stop words and duplicates, in order of first appearance; at most `MAX_QUERY_TERMS`
    words and `MAX_CJK_PAIRS` CJK character pairs (see the module docstring)."""
    terms: list[str] = []
    seen: set[str] = set()
    piece: list[str] = []
    words = pairs = 0
    for ch in _fold_width(text[:MAX_QUERY_CHARS]) + " ":
        if _is_word_char(ch):
            piece.append(ch)
            continue
        if piece:
            word = "".join(piece).casefold()
            piece.clear()
            for term in _split_cjk(word):
                if term in STOPWORDS or term in seen:
                    continue
                is_pair = " " in term
                if (pairs >= MAX_CJK_PAIRS) if is_pair else (words >= MAX_QUERY_TERMS):
                    continue
                seen.add(term)
                terms.append(term)
                pairs += is_pair
                words += not is_pair
            if words >= MAX_QUERY_TERMS and pairs >= MAX_CJK_PAIRS:
                break
    return terms


def build_match_expression(text: str) -> str | None:
    """An FTS5 MATCH expression OR-ing the quoted terms of `text`; None when none remain."""
    terms = query_terms(text)
    if not terms:
        return None
    # Terms hold no '"' (not a word character), so quoting needs no escaping.
    return " OR ".join(f'"{term}"' for term in terms)


class FullTextIndex:
    """One author's BM25 index (FTS5, contentless, in a private in-memory database)."""

    def __init__(self, *, heading_weight: float = 1.0, content_weight: float = 1.0) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._db.execute(
            "CREATE VIRTUAL TABLE chunks USING fts5("
            f"heading, content, content='', tokenize='{TOKENIZER}')"
        )
        # Default rank = bm25 with column weights, so `ORDER BY rank` sorts inside FTS5.
        self._db.execute(
            "INSERT INTO chunks(chunks, rank) VALUES ('rank', ?)",
            (f"bm25({float(heading_weight)}, {float(content_weight)})",),
        )
        self._rows: dict[int, ChunkData] = {}
        self._note_rows: dict[int, list[int]] = {}

    def replace_note(self, note_ord: int, chunks: Sequence[ChunkData]) -> None:
        """Swap every row of note `note_ord` for `chunks`, in one transaction."""
        self.replace_notes([(note_ord, chunks)])

    def replace_notes(self, items: Sequence[tuple[int, Sequence[ChunkData]]]) -> None:
        """`replace_note` for several notes (distinct ordinals) in ONE transaction."""
        if len({o for o, _ in items}) != len(items):
            raise ValueError("a note ordinal appears twice in one batch")
        plan: list[tuple[int, list[int], list[int], Sequence[ChunkData]]] = []
        for note_ord, chunks in items:
            if len(chunks) >= 1 << ROWID_BITS:
                raise ValueError("too many chunks in one note for the full-text index")
            new_rows = [(note_ord << ROWID_BITS) | pos for pos in range(len(chunks))]
            plan.append((note_ord, self._note_rows.get(note_ord, []), new_rows, chunks))
        with self._transaction():
            for _, old, new_rows, chunks in plan:
                self._delete_rows(old)
                self._db.executemany(
                    "INSERT INTO chunks(rowid, heading, content) VALUES (?, ?, ?)",
                    [
                        (r, indexed_heading(c), indexed_content(c.content_md))
                        for r, c in zip(new_rows, chunks, strict=True)
                    ],
                )
        # Only after COMMIT: a failed transaction leaves the row map as the table is.
        for note_ord, old, new_rows, chunks in plan:
            for row in old:
                del self._rows[row]
            self._rows.update(zip(new_rows, chunks, strict=True))
            if new_rows:
                self._note_rows[note_ord] = new_rows
            else:
                self._note_rows.pop(note_ord, None)

    def remove_note(self, note_ord: int) -> None:
        """Delete every row of note `note_ord` (no-op when absent)."""
        self.replace_note(note_ord, [])

    def search(
        self, text: str, k: int, allowed_notes: Sequence[int] | None = None
    ) -> list[tuple[ChunkData, float]]:
        """Top `k` chunks for `text` by BM25 (higher is better), restricted to notes whose
        ordinal is in `allowed_notes` (None: all) before ranking."""
        expression = build_match_expression(text)
        if expression is None or k <= 0 or not self._rows:
            return []
        if allowed_notes is not None and not allowed_notes:
            return []
        if allowed_notes is None:
            rows = self._db.execute(
                "SELECT rowid, rank FROM chunks WHERE chunks MATCH ? ORDER BY rank LIMIT ?",
                (expression, k),
            ).fetchall()
        else:
            rows = self._db.execute(
                "SELECT rowid, rank FROM chunks WHERE chunks MATCH ? "
                f"AND (rowid >> {ROWID_BITS}) IN (SELECT value FROM json_each(?)) "
                "ORDER BY rank LIMIT ?",
                (expression, json.dumps(list(allowed_notes)), k),
            ).fetchall()
        # FTS5's bm25() is negated so that ascending order is best first; flip it back.
        return [(self._rows[rowid], -rank) for rowid, rank in rows]

    def __len__(self) -> int:
        return len(self._rows)

    def memory_bytes(self) -> int:
        """Bytes of the database pages (postings, doc sizes) plus the connection's fixed
        cost; the chunk texts themselves are counted by the owner of the `ChunkData`."""
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        page_size = self._db.execute("PRAGMA page_size").fetchone()[0]
        row_map = 100 * len(self._rows)  # dict entry + int key, roughly
        return int(pages) * int(page_size) + row_map + CONNECTION_OVERHEAD_BYTES

    def close(self) -> None:
        self._db.close()

    def _delete_rows(self, rows: Sequence[int]) -> None:
        # A contentless table forgets its text: deleting needs the exact indexed values,
        # which the stored ChunkData still holds.
        self._db.executemany(
            "INSERT INTO chunks(chunks, rowid, heading, content) VALUES ('delete', ?, ?, ?)",
            [
                (
                    r,
                    indexed_heading(self._rows[r]),
                    indexed_content(self._rows[r].content_md),
                )
                for r in rows
            ],
        )

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


class _Transaction:
    """BEGIN … COMMIT, or ROLLBACK on error (the connection runs in autocommit mode)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._db.execute("COMMIT" if exc_type is None else "ROLLBACK")
