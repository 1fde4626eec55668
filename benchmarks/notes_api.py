"""Notes REST API latency and throughput over HTTP, against the embedded database (issue 2).

The real server (`autonote serve`: uvicorn + the app factory, default INFO JSON logging) runs
in a subprocess on 127.0.0.1 against an embedded SecantusDB started in a temp data dir; this
process drives it with httpx over keep-alive connections. With 1 000 realistic notes
(1–20 KB markdown, log-uniform) it measures create / get / list (pages of 20, with and
without a tag filter, full cursor walks) / patch (content change, tag-only) sequentially and
at concurrency 8, in two modes on the same corpus:

- `workers_on` — the default: two in-process indexing loops chunk and embed (local ONNX
  model) every created/edited note in the background, competing for the same 2 cores;
- `chunking_disabled` — `CHUNKING_ENABLED=false`: the API's own cost, no indexing load.

Every route is also stated as a ratio to baselines measured in the same run: GET /healthz
(no database) and GET /readyz (one `ping`) through the same HTTP stack, and a bare PyMongo
`find_one` of a note by `_id` against the same server — absolute ms drift on a shared
machine, ratios much less.

Reproduce: `.venv/bin/python -m benchmarks.notes_api` (`--quick` for a smoke-sized run,
`--no-write` to only print, `--modes workers_on` for one mode).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from bson import ObjectId
from pymongo import AsyncMongoClient, MongoClient

from benchmarks.common import machine_note, markdown_table, update_section
from benchmarks.notes_api_load import (
    FILTER_TAG,
    Job,
    NoteSpec,
    PhaseResult,
    Recorder,
    ServedApp,
    edited_content,
    http_client,
    make_corpus,
    run_jobs,
)
from benchmarks.service_harness import (
    ADMIN_TOKEN,
    LatencySummary,
    drop_database,
    embedded_server,
    ratio,
    summarize,
)

COMMAND = ".venv/bin/python -m benchmarks.notes_api"
MODES: dict[str, dict[str, str]] = {
    "workers_on": {"CHUNKING_ENABLED": "true"},
    "chunking_disabled": {"CHUNKING_ENABLED": "false"},
}
PAGE = 20


@dataclass(frozen=True, slots=True)
class Sizes:
    """How much work each phase does."""

    notes: int = 1000
    baseline: int = 300  # per baseline, per concurrency level, before and after the routes
    gets: int = 500  # per concurrency level
    list_requests: int = 150  # at least this many page requests per level and filter
    concurrency: int = 8

    @classmethod
    def quick(cls) -> Sizes:
        return cls(notes=40, baseline=30, gets=40, list_requests=8, concurrency=4)


@dataclass
class ModeResult:
    """Every series of one mode: {(route, concurrency): PhaseResult}."""

    mode: str
    phases: dict[tuple[str, int], PhaseResult] = field(default_factory=dict)
    notes_indexed: int = 0
    notes_total: int = 0
    chunks: int = 0
    wall_s: float = 0.0

    def add(self, route: str, result: PhaseResult) -> None:
        key = (route, result.concurrency)
        if key in self.phases:  # baselines are measured twice: pool the samples
            old = self.phases[key]
            result = PhaseResult(
                old.samples + result.samples, old.wall_s + result.wall_s, result.concurrency
            )
        self.phases[key] = result


def _create_job(index: int, spec: NoteSpec, ids: dict[int, str]) -> Job:
    async def job(client: httpx.AsyncClient, rec: Recorder) -> None:
        body = {"title": spec.title, "content_md": spec.content_md, "tags": spec.tags}
        resp = await rec.call(client, "POST", "/v1/notes", expect=201, json=body)
        ids[index] = resp.json()["id"]

    return job


def _request_job(method: str, url: str, expect: int = 200, **kwargs: Any) -> Job:
    async def job(client: httpx.AsyncClient, rec: Recorder) -> None:
        await rec.call(client, method, url, expect=expect, **kwargs)

    return job


def _walk_job(tag: str | None) -> Job:
    """One full cursor walk of the listing, a page of 20 at a time."""

    async def job(client: httpx.AsyncClient, rec: Recorder) -> None:
        params: dict[str, Any] = {"limit": PAGE, **({"tag": tag} if tag else {})}
        while True:
            page = (await rec.call(client, "GET", "/v1/notes", params=params)).json()
            if not page["next_cursor"]:
                return
            params["cursor"] = page["next_cursor"]

    return job


async def _find_one_baseline(
    mongo_url: str, db_name: str, ids: list[ObjectId], concurrency: int
) -> PhaseResult:
    """A bare PyMongo `find_one({_id})` of a note, from this process, same server."""
    client: AsyncMongoClient = AsyncMongoClient(mongo_url, maxPoolSize=max(concurrency, 1))
    try:
        coll = client[db_name].notes
        await coll.find_one({"_id": ids[0]})  # connect outside the timing
        pending = iter(ids)
        samples: list[float] = []

        async def worker() -> None:
            for oid in pending:
                start = time.perf_counter()
                doc = await coll.find_one({"_id": oid})
                samples.append(time.perf_counter() - start)
                if doc is None:
                    raise RuntimeError(f"note {oid} missing")

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return PhaseResult(samples, time.perf_counter() - start, concurrency)
    finally:
        await client.close()


async def _baselines(
    result: ModeResult, app: ServedApp, headers: dict[str, str], mongo_url: str, db_name: str,
    ids: list[str], sizes: Sizes, rng: random.Random,
) -> None:
    oids = [ObjectId(i) for i in ids]
    for conc in (1, sizes.concurrency):
        async with http_client(app.url, conc, headers) as client:
            for route in ("/healthz", "/readyz"):
                jobs = [_request_job("GET", route) for _ in range(sizes.baseline)]
                await run_jobs(client, jobs[: conc * 2], conc)  # warm the connections
                result.add(f"GET {route}", await run_jobs(client, jobs, conc))
        picks = [rng.choice(oids) for _ in range(sizes.baseline)]
        result.add("PyMongo find_one", await _find_one_baseline(mongo_url, db_name, picks, conc))


async def _routes(
    result: ModeResult, app: ServedApp, headers: dict[str, str], corpus: list[NoteSpec],
    ids: list[str], sizes: Sizes, rng: random.Random,
) -> None:
    conc_levels = (1, sizes.concurrency)
    by_id = dict(zip(ids, corpus, strict=True))
    shuffled = ids[:]
    rng.shuffle(shuffled)
    halves = (shuffled[: len(ids) // 2], shuffled[len(ids) // 2 :])
    n_tagged = sum(FILTER_TAG in s.tags for s in corpus)
    for conc in conc_levels:
        async with http_client(app.url, conc, headers) as client:
            gets = [_request_job("GET", f"/v1/notes/{rng.choice(ids)}") for _ in range(sizes.gets)]
            result.add("GET /v1/notes/{id}", await run_jobs(client, gets, conc))
            for label, tag, matching in (("", None, len(ids)), (" ?tag=", FILTER_TAG, n_tagged)):
                pages = max(1, math.ceil(matching / PAGE))
                walks = max(conc, math.ceil(sizes.list_requests / pages))
                jobs = [_walk_job(tag) for _ in range(walks)]
                result.add(f"GET /v1/notes{label}{tag or ''} (page of {PAGE})",
                           await run_jobs(client, jobs, conc))
    for conc, half in zip(conc_levels, halves, strict=True):
        async with http_client(app.url, conc, headers) as client:
            content_jobs = [
                _request_job("PATCH", f"/v1/notes/{i}",
                             json={"content_md": edited_content(by_id[i].content_md, n)})
                for n, i in enumerate(half)
            ]
            result.add("PATCH content (version +1)", await run_jobs(client, content_jobs, conc))
            tag_jobs = [
                _request_job("PATCH", f"/v1/notes/{i}", json={"tags": [*by_id[i].tags, "done"]})
                for i in half
            ]
            result.add("PATCH tags only", await run_jobs(client, tag_jobs, conc))


async def run_mode(
    mode: str, mongo_url: str, corpus: list[NoteSpec], sizes: Sizes, work_dir: Path
) -> ModeResult:
    """Serve the app in `mode` against a fresh database and measure every route."""
    db_name = f"bench_api_{mode}"
    drop_database(mongo_url, db_name)
    env = {
        "MONGODB_URL": mongo_url,
        "MONGODB_DB": db_name,
        "AUTONOTE_DATA_DIR": str(work_dir / mode),
        "AUTONOTE_ADMIN_TOKEN": ADMIN_TOKEN,
        "AUTONOTE_RATE_LIMIT_PER_MINUTE": "0",
        "AUTONOTE_CREATE_DEFAULT_USER": "false",
        "EMBEDDING_PROVIDER": "local",
        "LOG_LEVEL": "INFO",
        "LOG_JSON": "true",
        **MODES[mode],
    }
    result = ModeResult(mode)
    rng = random.Random(7)
    started = time.perf_counter()
    with ServedApp(env, work_dir / f"server-{mode}.log") as app:
        async with httpx.AsyncClient(base_url=app.url) as admin:
            resp = await admin.post("/v1/admin/users", json={"name": "bench"},
                                    headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
            resp.raise_for_status()
        headers = {"Authorization": f"Bearer {resp.json()['api_key']}"}
        half = len(corpus) // 2
        created: dict[int, str] = {}
        for conc, lo, hi in ((1, 0, half), (sizes.concurrency, half, len(corpus))):
            async with http_client(app.url, conc, headers) as client:
                jobs = [_create_job(i, corpus[i], created) for i in range(lo, hi)]
                result.add("POST /v1/notes", await run_jobs(client, jobs, conc))
        ids = [created[i] for i in range(len(corpus))]
        await _baselines(result, app, headers, mongo_url, db_name, ids, sizes, rng)
        await _routes(result, app, headers, corpus, ids, sizes, rng)
        await _baselines(result, app, headers, mongo_url, db_name, ids, sizes, rng)
        result.wall_s = time.perf_counter() - started
        client_sync: MongoClient = MongoClient(mongo_url)
        try:
            db = client_sync[db_name]
            result.notes_total = db.notes.count_documents({})
            result.notes_indexed = db.notes.count_documents(
                {"index_status": "indexed", "$expr": {"$eq": ["$indexed_version", "$version"]}}
            )
            result.chunks = db.note_chunks.count_documents({})
        finally:
            client_sync.close()
    drop_database(mongo_url, db_name)
    return result


BASELINES = ("GET /healthz", "GET /readyz", "PyMongo find_one")


def mode_table(result: ModeResult) -> str:
    """One markdown table: every series with its percentiles and baseline ratios."""
    rows = []
    for (route, conc), phase in result.phases.items():
        s: LatencySummary = summarize(phase.samples)
        health = summarize(result.phases[("GET /healthz", conc)].samples).p50
        find = summarize(result.phases[("PyMongo find_one", conc)].samples).p50
        rows.append([route, conc, *s.row(), f"{phase.throughput:.0f}",
                     ratio(s.p50, health), ratio(s.p50, find)])
    rows.sort(key=lambda r: (r[0] not in BASELINES, r[1]))
    headers = ["series", "conc.", "n", "P50 ms", "P95 ms", "P99 ms", "req/s",
               "P50 ÷ healthz", "P50 ÷ find_one"]
    return markdown_table(headers, rows)


def load_table(results: dict[str, ModeResult]) -> str:
    """P50 and P95 with the background indexer on, relative to the API alone."""
    on, off = results.get("workers_on"), results.get("chunking_disabled")
    if on is None or off is None:
        return ""
    rows = []
    for key, phase in off.phases.items():
        if key not in on.phases:
            continue
        a, b = summarize(on.phases[key].samples), summarize(phase.samples)
        rows.append([key[0], key[1], ratio(a.p50, b.p50), ratio(a.p95, b.p95)])
    return markdown_table(["series", "conc.", "P50 on ÷ off", "P95 on ÷ off"], rows)


def report(results: dict[str, ModeResult], corpus: list[NoteSpec], sizes: Sizes) -> str:
    kb = sorted(len(s.content_md.encode()) / 1024 for s in corpus)
    parts = [
        "## Notes API latency (issue 2)",
        "",
        f"Reproduce: `{COMMAND}`{' --quick' if sizes.notes < 1000 else ''}. {machine_note()}",
        "",
        f"{len(corpus)} realistic markdown notes ({kb[0]:.1f}–{kb[-1]:.1f} KB, median "
        f"{kb[len(kb) // 2]:.1f} KB; fenced code, lists, tables, 1–3 tags), created through "
        f"`POST /v1/notes` (first half sequentially, second half at concurrency "
        f"{sizes.concurrency}); list = full cursor walks, pages of {PAGE}; the tag filter "
        f"matches ~25 % of the notes; each content PATCH sends the whole body with one new "
        f"paragraph. Server: `autonote serve` (uvicorn, default INFO JSON logs to a file) in "
        f"its own process, rate limit off; client: httpx keep-alive, one connection per "
        f"concurrent worker. Throughput = requests ÷ wall time of that series. Baselines are "
        f"measured right after the creates and again at the end; both are pooled.",
    ]
    for mode, result in results.items():
        load = (
            f"indexing ON (2 in-process loops, local ONNX model): by the end "
            f"{result.notes_indexed}/{result.notes_total} notes were indexed at their latest "
            f"version ({result.chunks} chunks) — every series ran under full indexing load"
            if mode == "workers_on"
            else "`CHUNKING_ENABLED=false`: no chunking or embedding, the API's own cost"
        )
        parts += ["", f"### Mode `{mode}` — {load}", "", mode_table(result),
                  "", f"Mode wall time {result.wall_s:.0f} s."]
    table = load_table(results)
    if table:
        parts += ["", "### Cost of the background indexer (same corpus, same run)", "", table]
    return "\n".join(parts)


async def main_async(modes: list[str], sizes: Sizes, mongo_url: str | None) -> str:
    corpus = make_corpus(sizes.notes)
    results: dict[str, ModeResult] = {}
    with tempfile.TemporaryDirectory(prefix="autonote-bench-api-") as tmp:
        work = Path(tmp)
        if mongo_url is None:
            with embedded_server(work / "mongo") as url:
                for mode in modes:
                    results[mode] = await run_mode(mode, url, corpus, sizes, work)
        else:
            for mode in modes:
                results[mode] = await run_mode(mode, mongo_url, corpus, sizes, work)
    return report(results, corpus, sizes)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke-sized run")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--mongodb-url", help="use this server instead of an embedded one")
    args = parser.parse_args(argv)
    sizes = Sizes.quick() if args.quick else Sizes()
    body = asyncio.run(main_async(args.modes, sizes, args.mongodb_url))
    print(body)
    if not args.no_write:
        update_section("notes_api", body)


if __name__ == "__main__":
    main()
