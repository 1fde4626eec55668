"""Notes REST API latency and throughput over HTTP, against the embedded database.

The real server (`autonote serve`: uvicorn + the app factory, default INFO JSON logging) runs
in a subprocess on 127.0.0.1 against an embedded SecantusDB started in a temp data dir; this
process drives it with httpx over keep-alive connections. With 1 000 realistic notes
(1–20 KB markdown, log-uniform) it measures create / get / list (pages of 20, with and
without a tag filter, random pages) / patch (content change, tag-only) sequentially and
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
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from bson import ObjectId
from pymongo import MongoClient

from api.notes.stored import LISTED_STATUS
from benchmarks.common import update_claims, update_section
from benchmarks.notes_api_load import (
    FILTER_TAG,
    PAGE,
    Job,
    ModeResult,
    MongoOp,
    NoteSpec,
    Recorder,
    ServedApp,
    Sizes,
    edited_content,
    http_client,
    make_corpus,
    run_jobs,
    run_pymongo,
)
from benchmarks.notes_api_report import COMMAND, claims, report
from benchmarks.service_harness import ADMIN_TOKEN, drop_database, embedded_server

MODES: dict[str, dict[str, str]] = {
    "workers_on": {"CHUNKING_ENABLED": "true"},
    "chunking_disabled": {"CHUNKING_ENABLED": "false"},
}


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


async def _page_cursors(client: httpx.AsyncClient, tag: str | None) -> list[str | None]:
    """The cursor of every page of the listing (None = first page), from one untimed walk."""
    cursors: list[str | None] = [None]
    params: dict[str, Any] = {"limit": PAGE, **({"tag": tag} if tag else {})}
    while True:
        resp = await client.get("/v1/notes", params=params)
        resp.raise_for_status()
        cursor = resp.json()["next_cursor"]
        if not cursor:
            return cursors
        cursors.append(cursor)
        params["cursor"] = cursor


def _page_job(tag: str | None, cursor: str | None) -> Job:
    params: dict[str, Any] = {"limit": PAGE}
    if tag:
        params["tag"] = tag
    if cursor:
        params["cursor"] = cursor
    return _request_job("GET", "/v1/notes", params=params)


async def _baselines(
    result: ModeResult,
    app: ServedApp,
    headers: dict[str, str],
    mongo_url: str,
    db_name: str,
    ids: list[str],
    sizes: Sizes,
    rng: random.Random,
) -> None:
    oids = [ObjectId(i) for i in ids]
    author = await _author_of(mongo_url, db_name, oids[0])
    for conc in (1, sizes.concurrency):
        async with http_client(app.url, conc, headers) as client:
            for route in ("/healthz", "/readyz"):
                jobs = [_request_job("GET", route) for _ in range(sizes.baseline)]
                await run_jobs(client, jobs[: conc * 2], conc)  # warm the connections
                result.add(f"GET {route}", await run_jobs(client, jobs, conc))
        finds = [_find_one(rng.choice(oids)) for _ in range(sizes.baseline)]
        result.add("PyMongo find_one", await run_pymongo(mongo_url, db_name, finds, conc))
        query = {"author_id": author, "status": LISTED_STATUS["active"]}  # as the route
        lists = [_list_first_page(query) for _ in range(max(4, sizes.baseline // 5))]
        result.add(
            f"PyMongo list query (page of {PAGE})",
            await run_pymongo(mongo_url, db_name, lists, conc),
        )


def _find_one(oid: ObjectId) -> MongoOp:
    async def op(notes: Any) -> None:
        if await notes.find_one({"_id": oid}) is None:
            raise RuntimeError(f"note {oid} missing")

    return op


LIST_SORT = [("created_at", -1), ("_id", -1)]


def _list_first_page(query: dict[str, Any]) -> MongoOp:
    """The repository's listing query (filter, projection, sort, limit+1), first page."""

    async def op(notes: Any) -> None:
        await notes.find(query, {"content_md": 0}).sort(LIST_SORT).limit(PAGE + 1).to_list()

    return op


async def _routes(
    result: ModeResult,
    app: ServedApp,
    headers: dict[str, str],
    corpus: list[NoteSpec],
    ids: list[str],
    sizes: Sizes,
    rng: random.Random,
) -> None:
    conc_levels = (1, sizes.concurrency)
    by_id = dict(zip(ids, corpus, strict=True))
    shuffled = ids[:]
    rng.shuffle(shuffled)
    async with http_client(app.url, 1, headers) as client:
        cursors = {tag: await _page_cursors(client, tag) for tag in (None, FILTER_TAG)}
    for conc in conc_levels:
        async with http_client(app.url, conc, headers) as client:
            gets = [_request_job("GET", f"/v1/notes/{rng.choice(ids)}") for _ in range(sizes.gets)]
            result.add("GET /v1/notes/{id}", await run_jobs(client, gets, conc))
            for tag, pages in cursors.items():
                jobs = [_page_job(tag, rng.choice(pages)) for _ in range(sizes.list_requests)]
                label = f" ?tag={tag}" if tag else ""
                result.add(
                    f"GET /v1/notes{label} (random page of {PAGE})",
                    await run_jobs(client, jobs, conc),
                )
    for level, conc in enumerate(conc_levels):
        # Each PATCH series edits notes no other series touched.
        lo = 2 * level * sizes.patches
        content_ids = shuffled[lo : lo + sizes.patches]
        tag_ids = shuffled[lo + sizes.patches : lo + 2 * sizes.patches]
        async with http_client(app.url, conc, headers) as client:
            content_jobs = [
                _request_job(
                    "PATCH",
                    f"/v1/notes/{i}",
                    json={"content_md": edited_content(by_id[i].content_md, n)},
                )
                for n, i in enumerate(content_ids)
            ]
            result.add("PATCH content (version +1)", await run_jobs(client, content_jobs, conc))
            tag_jobs = [
                _request_job("PATCH", f"/v1/notes/{i}", json={"tags": [*by_id[i].tags, "done"]})
                for i in tag_ids
            ]
            result.add("PATCH tags only", await run_jobs(client, tag_jobs, conc))


async def _author_of(mongo_url: str, db_name: str, oid: ObjectId) -> ObjectId:
    client: MongoClient = MongoClient(mongo_url)
    try:
        return client[db_name].notes.find_one({"_id": oid}, {"author_id": 1})["author_id"]
    finally:
        client.close()


def list_plan(mongo_url: str, db_name: str) -> str:
    """What the server does for the first listing page: plan stages and documents read."""
    client: MongoClient = MongoClient(mongo_url)
    try:
        notes = client[db_name].notes
        author = notes.find_one({}, {"author_id": 1})["author_id"]
        listed = {"author_id": author, "status": LISTED_STATUS["active"]}
        cursor = notes.find(listed, {"content_md": 0})
        plan = cursor.sort(LIST_SORT).limit(PAGE + 1).explain()
    finally:
        client.close()
    stages, node = [], plan.get("queryPlanner", {}).get("winningPlan", {})
    while node:
        stages.append(node.get("stage", "?"))
        node = node.get("inputStage")
    stats = plan.get("executionStats", {})
    return (
        f"plan {' ← '.join(stages)}; {stats.get('totalDocsExamined', '?')} documents "
        f"examined, {stats.get('nReturned', '?')} returned by the scan, for a page of {PAGE}"
    )


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
    result = ModeResult(mode, load=[os.getloadavg()[0]])
    rng = random.Random(7)
    started = time.perf_counter()
    with ServedApp(env, work_dir / f"server-{mode}.log") as app:
        async with httpx.AsyncClient(base_url=app.url) as admin:
            resp = await admin.post(
                "/v1/admin/users",
                json={"name": "bench"},
                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            )
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
        result.list_plan = list_plan(mongo_url, db_name)
        result.wall_s = time.perf_counter() - started
        result.load.append(os.getloadavg()[0])
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


async def main_async(
    modes: list[str], sizes: Sizes, mongo_url: str | None
) -> tuple[dict[str, ModeResult], list[NoteSpec]]:
    """Every mode on the same corpus, and the corpus."""
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
    return results, corpus


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke-sized run")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--mongodb-url", help="use this server instead of an embedded one")
    args = parser.parse_args(argv)
    sizes = Sizes.quick() if args.quick else Sizes()
    results, corpus = asyncio.run(main_async(args.modes, sizes, args.mongodb_url))
    body = report(results, corpus, sizes)
    print(body)
    if not args.no_write:
        update_section("notes_api", body)
        update_claims(claims(results), COMMAND)


if __name__ == "__main__":
    main()
