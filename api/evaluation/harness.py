"""The ONE retrieval evaluation pipeline: every benchmark, script and test uses it.

`open_corpus` loads a dataset's notes for one user of a throwaway database through the real
write path and indexer; `EvalCorpus.evaluate` runs each question through the real search and
scores it (`api.evaluation.metrics`). One corpus per chunking configuration, any number of
search configurations against it.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymongo
import structlog
from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import PyMongoError

from api.chunk_store.repository import ChunksRepository
from api.config import Settings, load_settings
from api.db.client import create_client, ensure_indexes
from api.evaluation.dataset import Dataset, Question
from api.evaluation.embedding_cache import CachingEmbedder
from api.evaluation.metrics import Citation, Metrics, QuestionOutcome, RankedNote, aggregate, judge
from api.indexing.generation import indexed_pin
from api.indexing.runtime import build_indexing
from api.notes.repository import NotesRepository, NotesSearchQueries
from api.notes.schemas import NoteCreate
from api.notes.service import NotesService
from api.providers import build_chunker, build_embedder, build_openai_client, embedding_model_key
from api.retrieval.backends import LocalBackend, Mode
from api.retrieval.local.index import LocalIndex
from api.retrieval.local.sync import LocalIndexSync, chunk_record
from api.retrieval.service import RankingConfig, RetrievalService
from api.retrieval.types import ChunkRecord, NoteResult
from api.users.types import User

log = structlog.get_logger(__name__)

DRAIN_TIMEOUT_S = 3600.0
DROP_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class SearchConfig:
    """How questions are asked. `limit`/`chunks_per_note` default to what chat asks for
    (ChatService: 6 notes, 3 sections each); the BM25 column weights are the local keyword
    index's (`LocalIndex(heading_weight=, content_weight=)`; production uses 1.0/1.0)."""

    mode: Mode = "hybrid"
    ranking: RankingConfig = field(default_factory=RankingConfig)
    limit: int = 6
    chunks_per_note: int = 3
    heading_weight: float = 1.0
    content_weight: float = 1.0


@dataclass(frozen=True, slots=True)
class IndexReport:
    """What loading the corpus did."""

    notes: int
    chunks: int
    mean_chunk_tokens: float
    texts_embedded: int  # embedder calls' inputs that were not cache hits
    seconds: float


@dataclass(frozen=True, slots=True)
class EvalRun:
    """One evaluation: per-question outcomes, their aggregate, and search times."""

    label: str
    search: SearchConfig
    outcomes: tuple[QuestionOutcome, ...]
    metrics: Metrics
    search_ms: tuple[float, ...]

    def rows(self) -> list[dict[str, Any]]:
        """Per-question records (JSON-ready) for inspection: ranks and cited spans."""
        return [
            {
                "question_id": o.question_id,
                "type": o.qtype,
                "rank": o.rank,
                "search_rank": o.search_rank,
                "strict_rank": o.strict_rank,
                "note_rank": o.note_rank,
                "citations": [[c.note_id, c.start, c.end, round(c.score, 6)] for c in o.citations],
            }
            for o in self.outcomes
        ]


def eval_settings(
    mongo_url: str, db_name: str, data_dir: Path, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """Settings for an evaluation database; `overrides` use Settings field names
    (`chunking_strategy`, `chunking_max_tokens`, `embedding_provider`, ...). Anything not
    overridden comes from the environment / `.env`, as for the app."""
    values: dict[str, Any] = {"log_level": "WARNING", **(overrides or {})}
    values.update(
        mongodb_url=mongo_url,
        mongodb_db=db_name,
        autonote_data_dir=data_dir,
        autonote_create_default_user=False,
        search_backend="local",
    )
    return load_settings(**values)


@contextlib.contextmanager
def eval_server(mongo_url: str | None = None) -> Iterator[str]:
    """Yield `mongo_url`, or start the embedded server in a temp dir (removed afterwards).

    Run it in the thread that outlives the server (the server dies with its creator)."""
    if mongo_url is not None:
        yield mongo_url
        return
    from api.db.embedded import EmbeddedMongo

    path = Path(tempfile.mkdtemp(prefix="autonote-eval-"))
    server = EmbeddedMongo(path)
    try:
        yield server.start()
    finally:
        server.stop()
        shutil.rmtree(path, ignore_errors=True)


def default_embedder(settings: Settings | None = None) -> CachingEmbedder:
    """The configured embedder (local ONNX unless OpenAI is configured), with a cache.
    The caller closes it (`await embedder.aclose()`)."""
    settings = settings or load_settings(log_level="WARNING")
    return CachingEmbedder(build_embedder(settings, build_openai_client(settings)))


def ranked_notes(results: Sequence[NoteResult], id_map: Mapping[str, str]) -> list[RankedNote]:
    """A search response as metrics see it: notes in rank order, each with its sections
    (`SectionMatch` offsets and scores) in the order the response lists them."""
    out = []
    for r in results:
        note_id = id_map.get(r.note_id, r.note_id)
        sections = tuple(
            Citation(note_id, s.start_offset, s.end_offset, s.score) for s in r.matching_chunks
        )
        out.append(RankedNote(note_id=note_id, sections=sections))
    return out


class EvalCorpus:
    """A dataset indexed for one user in one database with one chunking configuration."""

    def __init__(
        self,
        dataset: Dataset,
        settings: Settings,
        db: AsyncDatabase,
        embedder: Any,
        author_id: ObjectId,
        id_map: dict[str, str],
        report: IndexReport,
    ) -> None:
        self.dataset = dataset
        self.settings = settings
        self.db = db
        self.embedder = embedder
        self.author_id = author_id
        self.id_map = id_map  # database note id → dataset note id
        self.report = report
        self._indexes: dict[tuple[float, float], LocalIndex] = {}

    async def index_for(
        self, heading_weight: float = 1.0, content_weight: float = 1.0
    ) -> LocalIndex:
        """The local index over this corpus's `note_chunks` (one per BM25 weighting)."""
        key = (heading_weight, content_weight)
        if key not in self._indexes:
            index = LocalIndex(
                self.embedder.dimensions,
                heading_weight=heading_weight,
                content_weight=content_weight,
            )
            sync = LocalIndexSync(self.db, index, model_key=embedding_model_key(self.embedder))
            await sync.load_all()
            self._indexes[key] = index
        return self._indexes[key]

    async def service(self, search: SearchConfig) -> RetrievalService:
        """The retrieval service as the app builds it for SEARCH_BACKEND=local."""
        index = await self.index_for(search.heading_weight, search.content_weight)
        return RetrievalService(
            LocalBackend(index),
            self.embedder,
            NotesSearchQueries(self.db),
            ranking=search.ranking,
            chunking_enabled=self.settings.chunking_enabled,
        )

    def ranked(self, results: Sequence[NoteResult]) -> list[RankedNote]:
        """Search results as dataset-level ranked notes (database ids mapped back)."""
        return ranked_notes(results, self.id_map)

    async def evaluate(
        self,
        questions: Sequence[Question] | None = None,
        search: SearchConfig | None = None,
        *,
        label: str = "",
    ) -> EvalRun:
        """Ask every question (default: the dataset's) and score the answers."""
        search = search or SearchConfig()
        questions = self.dataset.questions if questions is None else questions
        service = await self.service(search)
        outcomes: list[QuestionOutcome] = []
        took: list[float] = []
        for q in questions:
            out = await service.search(
                self.author_id,
                q.question,
                limit=search.limit,
                chunks_per_note=search.chunks_per_note,
                mode=search.mode,
            )
            took.append(out.took_ms)
            outcomes.append(judge(q, self.ranked(out.results), self.dataset.notes))
        return EvalRun(label, search, tuple(outcomes), aggregate(outcomes), tuple(took))

    async def chunk_records(self) -> list[ChunkRecord]:
        """Every indexed chunk with its vector (e.g. to build a larger synthetic index)."""
        chunks = ChunksRepository(self.db)
        notes = await self.db.notes.find(
            {"author_id": self.author_id, "indexed_version": {"$ne": None}},
            {
                "_id": 1,
                "indexed_version": 1,
                "generation": 1,
                "chunking_version": 1,
                "embedding_model": 1,
            },
        ).to_list()
        wanted = [(n["_id"], *pin) for n in notes if (pin := indexed_pin(n)) is not None]
        return [chunk_record(doc) async for doc in chunks.iter_versions(wanted)]


async def _load_notes(
    dataset: Dataset, settings: Settings, db: AsyncDatabase, chunker: Any, author: User
) -> dict[str, str]:
    notes = NotesService(
        NotesRepository(db),
        ChunksRepository(db),
        max_note_bytes=settings.autonote_max_note_bytes,
        max_tags=settings.autonote_max_tags,
        max_tag_length=settings.autonote_max_tag_length,
        chunking_enabled=settings.chunking_enabled,
        chunking_strategy=chunker.strategy,
        chunking_version=chunker.version,
    )
    id_map: dict[str, str] = {}
    for note in dataset.notes.values():
        doc = await notes.create(
            author, NoteCreate(title=note.title, content_md=note.content_md, tags=list(note.tags))
        )
        id_map[str(doc["_id"])] = note.id
    return id_map


async def _index_all(settings: Settings, db: AsyncDatabase, chunker: Any, embedder: Any) -> None:
    indexing = build_indexing(settings, db, chunker=chunker, embedder=embedder, concurrency=1)
    await indexing.workers.drain(timeout_s=DRAIN_TIMEOUT_S)
    bad = await db.notes.find(
        {"index_status": {"$ne": "indexed"}}, {"title": 1, "index_status": 1, "index_error": 1}
    ).to_list()
    if bad:
        detail = "; ".join(
            f"{d['title']!r}: {d['index_status']} {d.get('index_error')}" for d in bad
        )
        raise RuntimeError(f"{len(bad)} note(s) failed to index: {detail[:2000]}")


async def _report(db: AsyncDatabase, notes: int, misses: int, started: float) -> IndexReport:
    stats = await db.note_chunks.aggregate(
        [{"$group": {"_id": None, "n": {"$sum": 1}, "tokens": {"$avg": "$token_count"}}}]
    )
    row = (await stats.to_list()) or [{"n": 0, "tokens": 0.0}]
    return IndexReport(
        notes=notes,
        chunks=int(row[0]["n"]),
        mean_chunk_tokens=float(row[0]["tokens"] or 0.0),
        texts_embedded=misses,
        seconds=time.perf_counter() - started,
    )


async def _drop(client: Any, db_name: str) -> None:
    """Drop the throwaway database. A slow or failed drop must not cost the caller its
    results (dropping a large database on a loaded machine has taken over a minute), so
    it gets a long timeout and a failure is logged with the name to drop by hand."""
    try:
        with pymongo.timeout(DROP_TIMEOUT_S):
            await client.drop_database(db_name)
    except PyMongoError as exc:
        log.warning("eval.drop_failed", database=db_name, error=type(exc).__name__)


@contextlib.asynccontextmanager
async def open_corpus(
    dataset: Dataset,
    *,
    mongo_url: str,
    settings_overrides: Mapping[str, Any] | None = None,
    embedder: Any | None = None,
    keep_database: bool = False,
) -> AsyncIterator[EvalCorpus]:
    """Load `dataset` into a fresh database on `mongo_url` (see `eval_server`) with the
    settings overrides, index it, and yield the corpus; the database is dropped afterwards
    unless `keep_database`. `embedder` (e.g. one shared `CachingEmbedder`) is used as given
    and not closed; without it the configured one is built, cached and closed here."""
    db_name = f"autonote_eval_{uuid.uuid4().hex[:12]}"
    data_dir = Path(tempfile.mkdtemp(prefix="autonote-eval-data-"))
    settings = eval_settings(mongo_url, db_name, data_dir, settings_overrides)
    own_embedder = embedder is None
    if embedder is None:
        embedder = default_embedder(settings)
    client = create_client(mongo_url, timeout_ms=max(settings.mongodb_timeout_ms, 10_000))
    try:
        db = client[db_name]
        await ensure_indexes(db, cache_ttl_days=settings.autonote_embedding_cache_days)
        started = time.perf_counter()
        misses = getattr(embedder, "misses", 0)
        chunker = build_chunker(settings, embedder)
        author = User(id=ObjectId(), name="eval")
        id_map = await _load_notes(dataset, settings, db, chunker, author)
        if settings.chunking_enabled:
            await _index_all(settings, db, chunker, embedder)
        report = await _report(db, len(id_map), getattr(embedder, "misses", 0) - misses, started)
        log.info(
            "eval.corpus_indexed",
            strategy=settings.chunking_strategy,
            max_tokens=settings.chunk_max_tokens,
            notes=report.notes,
            chunks=report.chunks,
            seconds=round(report.seconds, 1),
        )
        corpus = EvalCorpus(dataset, settings, db, embedder, author.id, id_map, report)
        try:
            yield corpus
        finally:
            for index in corpus._indexes.values():
                index.close()
    finally:
        try:
            if not keep_database:
                await _drop(client, db_name)
        finally:
            await client.close()
            shutil.rmtree(data_dir, ignore_errors=True)
            if own_embedder:
                await embedder.aclose()
