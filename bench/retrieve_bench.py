"""Benchmark of ``retrieve_context`` at 10k and 100k child chunks with ACL filters, in-process, over HTTP
and over Kafka RPC, plus dense recall@10 of the production dense arm against exact search.

    .venv/bin/python bench/retrieve_bench.py [--sizes 10000,100000] [--queries 200] [--concurrency 8]
        [--corpus ../shared/data/herb/events.jsonl] [--transports in_process,http,kafka]

Each size loads a corpus — synthetic chat/doc-like text from a ~60-word vocabulary (every query term
is common), or with ``--corpus`` the ``text`` of a real events.jsonl (HERB: Slack, docs, meetings,
PRs; cycled when the size exceeds it) — with an org of 4 divisions x 5 teams x 10 users,
documents shared org-wide 10 %, per division 20 %, per team 55 %, private 15 %) straight into an
isolated schema (COPY; hash embedder), builds the HNSW index, then measures. Viewers are random users
with their team group, i.e. they see ~18 % of the corpus. Prints one JSON object and writes it to
``bench/results/retrieve-<timestamp>.json``. Uses the stack in ``.env`` (``make up`` / ``deploy/stack.sh``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg
import httpx
import uvicorn

from embedder.repository import ensure_hnsw_index
from orgmem_sdk.client import OrgMemoryClient
from retriever.dense import DenseConfig, _dense_hnsw, dense_arm, dense_exact
from retriever.lexical import lexical_arm
from retriever.scope import SearchScope
from retriever.wiring import get_service
from schemas.tools import RetrieveContextRequest
from services.api.app import create_app
from services.db.migrate import migrate
from services.db.pool import quote_ident
from services.serve import start_runtime, stop_runtime
from services.settings import Settings, load_settings
from services.viewer import Viewer

PEOPLE = ["Dana", "Mel", "Priya", "Tom", "Aiko", "Luis", "Sam", "Noor", "Jonas", "Fatima", "Omar", "Ana"]
TOPICS = [
    "quarterly budget review",
    "Kafka migration",
    "onboarding doc",
    "Acme Robotics escalation",
    "Postgres failover drill",
    "platform hiring plan",
    "retrieval service design review",
    "offsite agenda",
    "Tuesday incident postmortem",
    "Europe pricing experiment",
    "SOC2 audit evidence",
    "mobile release train",
    "data retention policy",
    "search relevance tuning",
    "billing ledger rewrite",
    "customer churn analysis",
]
VERBS = [
    "moved",
    "approved",
    "blocked",
    "reviewed",
    "shipped",
    "rescheduled",
    "escalated",
    "drafted",
    "merged",
]
FILLER = [
    "the",
    "team",
    "agreed",
    "that",
    "we",
    "should",
    "revisit",
    "this",
    "after",
    "the",
    "next",
    "sprint",
    "because",
    "several",
    "dependencies",
    "are",
    "still",
    "unclear",
    "and",
    "the",
    "owners",
    "want",
    "more",
    "data",
    "before",
    "committing",
    "to",
    "a",
    "date",
]


def make_text(rng: random.Random, i: int) -> tuple[str, str]:
    topic = rng.choice(TOPICS)
    p1, p2 = rng.sample(PEOPLE, 2)
    words = " ".join(rng.sample(FILLER, 12))
    when = rng.choice(["Monday", "Friday", "next week", "end of month"])
    text = (
        f"{p1} {rng.choice(VERBS)} the {topic} and asked {p2} to follow up by {when}. "
        f"Note {i}: {words}. Ticket OM-{rng.randint(100, 99999)} tracks it."
    )
    return f"{topic.title()} update", text


class Org:
    def __init__(self, rng: random.Random) -> None:
        self.org = str(uuid.uuid4())
        self.divisions = [str(uuid.uuid4()) for _ in range(4)]
        self.teams = {str(uuid.uuid4()): self.divisions[i // 5] for i in range(20)}
        self.users = {str(uuid.uuid4()): team for team in self.teams for _ in range(10)}
        self.rng = rng

    def config(self) -> dict[str, Any]:
        groups: dict[str, Any] = {self.org: {"level": "org", "parent": None, "name": "org"}}
        groups |= {
            d: {"level": "division", "parent": self.org, "name": f"div{i}"} for i, d in enumerate(self.divisions)
        }
        groups |= {t: {"level": "team", "parent": d, "name": "team"} for t, d in self.teams.items()}
        return {"groups": groups}

    def principals(self) -> list[str]:
        r = self.rng.random()
        if r < 0.10:
            return [f"group:{self.org}"]
        if r < 0.30:
            return [f"group:{self.rng.choice(self.divisions)}"]
        if r < 0.85:
            return [f"group:{self.rng.choice(list(self.teams))}"]
        return [f"user:{self.rng.choice(list(self.users))}"]

    def viewer(self) -> Viewer:
        user = self.rng.choice(list(self.users))
        return Viewer(f"user:{user}", (f"group:{self.users[user]}",), frozenset())


def corpus_texts(path: Path) -> list[tuple[str, str]]:
    """(title, text) of every event with text in an events.jsonl (title = its thread or kind)."""
    out = []
    with path.open() as fh:
        for line in fh:
            e = json.loads(line)
            if (e.get("text") or "").strip():
                out.append((str(e.get("thread") or e.get("kind") or ""), str(e["text"])))
    if not out:
        raise SystemExit(f"{path}: no events with text")
    return out


async def load_corpus(
    settings: Settings, org: Org, n: int, rng: random.Random, real: list[tuple[str, str]] | None = None
) -> list[str]:
    from embedder.hashing import HashingEmbedder

    emb = HashingEmbedder(dim=settings.embedding_dim)
    model = f"hash/v1-{settings.embedding_dim}"
    conn = await asyncpg.connect(
        settings.database_url, server_settings={"search_path": f"{quote_ident(settings.db_schema)}, public"}
    )
    from pgvector.asyncpg import register_vector

    await register_vector(conn)
    texts: list[str] = []
    base = datetime(2024, 1, 1, tzinfo=UTC)
    step = 5000
    for lo in range(0, n, step):
        docs, chunks = [], []
        batch = [real[i % len(real)] if real else make_text(rng, i) for i in range(lo, min(n, lo + step))]
        vectors = await emb.embed([f"{t}\n\n{x}" for t, x in batch])
        for (title, text), vec in zip(batch, vectors, strict=True):
            did, pid, cid = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
            principals = org.principals()
            when = base + timedelta(minutes=rng.randint(0, 900 * 24 * 60))
            ext = f"msg-{did.hex[:12]}"
            docs.append((did, "default", "slack", ext, "message", title, when, 1, principals))
            common = ("default", title, principals, when, "slack", "message")
            chunks.append((pid, did, None, True, 0, text, uuid.uuid4().hex, None, None, *common))
            chunks.append((cid, did, pid, False, 1, text, uuid.uuid4().hex, vec, model, *common))
            texts.append(text)
        await conn.copy_records_to_table(
            "documents",
            records=docs,
            columns=[
                "id",
                "workspace",
                "source_system",
                "external_id",
                "kind",
                "title",
                "event_time",
                "current_version",
                "principals",
            ],
        )
        await conn.copy_records_to_table(
            "chunks",
            records=[
                (
                    c[0],
                    c[1],
                    c[9],
                    c[2],
                    c[3],
                    c[4],
                    0,
                    len(c[5]),
                    c[5],
                    c[10],
                    c[6],
                    c[7],
                    c[8],
                    c[11],
                    c[12],
                    c[13],
                    c[14],
                )
                for c in chunks
            ],
            columns=[
                "id",
                "document_id",
                "workspace",
                "parent_id",
                "is_parent",
                "ordinal",
                "char_start",
                "char_end",
                "text",
                "title",
                "content_hash",
                "embedding",
                "embedding_model",
                "principals",
                "event_time",
                "source_system",
                "kind",
            ],
        )
    await conn.execute(
        "UPDATE chunks SET tsv = setweight(to_tsvector('english', coalesce(title, '')), 'A')"
        " || to_tsvector('english', text) WHERE NOT is_parent"
    )
    await conn.execute("SET maintenance_work_mem = '1GB'")
    t = time.perf_counter()
    await ensure_hnsw_index(conn, model, settings.embedding_dim)
    index_s = time.perf_counter() - t
    await conn.execute("VACUUM ANALYZE chunks")
    await conn.execute("ANALYZE documents")
    await conn.close()
    print(f"[bench] loaded {n} chunks, HNSW build {index_s:.1f}s", file=sys.stderr)
    return texts


def query_for(rng: random.Random, texts: list[str]) -> str:
    words = rng.choice(texts).split()
    start = rng.randint(0, max(0, len(words) - 6))
    return " ".join(words[start : start + rng.randint(3, 6)]).strip(".:,")


def stats(lat_ms: list[float]) -> dict[str, float]:
    q = statistics.quantiles(lat_ms, n=100, method="inclusive")
    return {
        "p50_ms": round(statistics.median(lat_ms), 2),
        "p95_ms": round(q[94], 2),
        "p99_ms": round(q[98], 2),
        "n": len(lat_ms),
    }


async def measure(call: Any, queries: list[tuple[str, Viewer]], concurrency: int) -> dict[str, Any]:
    for q, v in queries[:20]:
        await call(q, v)
    lat: list[float] = []
    for q, v in queries:
        t = time.perf_counter()
        await call(q, v)
        lat.append((time.perf_counter() - t) * 1000)
    sem = asyncio.Semaphore(concurrency)

    async def one(q: str, v: Viewer) -> None:
        async with sem:
            await call(q, v)

    t = time.perf_counter()
    await asyncio.gather(*(one(q, v) for q, v in queries))
    rps = len(queries) / (time.perf_counter() - t)
    return stats(lat) | {"requests_per_s": round(rps, 1), "concurrency": concurrency}


async def dense_recall(rt: Any, org: Org, texts: list[str], rng: random.Random, n: int = 100) -> dict[str, Any]:
    """recall@10 of the production dense arm (and of a plain ef_search=40 HNSW scan) vs exact search."""
    svc = get_service(rt)
    cfg = DenseConfig(rt.embedding.model, rt.embedding.dim, await svc.passages.pgvector())
    out: dict[str, Any] = {}
    viewers = {
        "team_only_2.75pct": lambda: (f"group:{rng.choice(list(org.teams))}",),
        "division_only_5pct": lambda: (f"group:{rng.choice(org.divisions)}",),
        "user_with_team_18pct": lambda: org.viewer().expand(svc.hierarchy),
    }
    for name, make in viewers.items():
        prod: list[float] = []
        naive: list[float] = []
        strategies: dict[str, int] = {}
        for _ in range(n):
            viewer = tuple(sorted(svc.hierarchy.expand(make())))
            scope = SearchScope("default", viewer)
            vec = (await svc.passages.embedder.embed_queries([query_for(rng, texts)]))[0]  # type: ignore[union-attr]
            async with rt.pool.acquire() as conn:
                exact = set(await dense_exact(conn, scope, vec, cfg, 10))
                got = await dense_arm(conn, scope, vec, cfg, 10)
                plain = await _dense_hnsw(conn, scope, vec, cfg, 10, 40, iterative=False)
            strategies[got.strategy] = strategies.get(got.strategy, 0) + 1
            if exact:
                prod.append(len(exact & set(got.ids[:10])) / len(exact))
                naive.append(len(exact & set(plain)) / len(exact))
        out[name] = {
            "recall_at_10": round(statistics.mean(prod), 4),
            "plain_hnsw_ef40_recall_at_10": round(statistics.mean(naive), 4),
            "strategies": strategies,
        }
    return out


async def lexical_overlap(rt: Any, org: Org, texts: list[str], rng: random.Random, n: int) -> dict[str, Any]:
    """overlap@10 of the production lexical arm (rare-term candidates over ``chunk_lexemes``, maintained counts)
    with exact BM25 (every term generates, every df counted) for ``n`` queries, and both arms' latency."""
    svc = get_service(rt)
    overlap: list[float] = []
    prod_ms: list[float] = []
    exact_ms: list[float] = []
    async with rt.pool.acquire() as conn:
        for _ in range(n):
            scope = SearchScope("default", org.viewer().expand(svc.hierarchy))
            q = query_for(rng, texts)
            t = time.perf_counter()
            exact = await lexical_arm(conn, scope, q, 10, None)
            exact_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            got = await lexical_arm(conn, scope, q, 10, maintained=True)
            prod_ms.append((time.perf_counter() - t) * 1000)
            if exact.ids:
                overlap.append(len(set(exact.ids) & set(got.ids)) / len(exact.ids))
    return {
        "overlap_at_10_vs_exact_bm25": round(statistics.mean(overlap), 4) if overlap else None,
        "production_p50_ms": round(statistics.median(prod_ms), 2) if prod_ms else None,
        "exact_p50_ms": round(statistics.median(exact_ms), 2) if exact_ms else None,
        "queries": len(overlap),
    }


async def bench_size(base: Settings, n: int, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(n)
    tag = uuid.uuid4().hex[:8]
    org = Org(rng)
    hier = Path(f"/tmp/orgmem-bench-{tag}.json")
    hier.write_text(json.dumps(org.config()))
    s = load_settings(
        _env_file=".env",
        db_schema=f"bench_{tag}",
        topic_namespace=f"bench{tag}",
        group_prefix=f"bench{tag}-",
        embedding_provider="hash",
        org_hierarchy_path=str(hier),
        service_api_key="bench-key",
        topic_partitions=3,
        db_pool_max=20,
    )
    await migrate(s.database_url, s.db_schema)
    real = corpus_texts(Path(args.corpus)) if args.corpus else None
    texts = await load_corpus(s, org, n, rng, real)
    rt = await start_runtime(s, ["retrieve"])
    result: dict[str, Any] = {"chunks": n}
    try:
        svc = get_service(rt)
        queries = [(query_for(rng, texts), org.viewer()) for _ in range(args.queries)]

        async def direct(q: str, v: Viewer) -> None:
            await svc.retrieve_context(RetrieveContextRequest(query=q), v)

        result["in_process"] = await measure(direct, queries, args.concurrency)
        if "http" in args.transports:
            result["http"] = await http_transport(rt, queries, args)
        if "kafka" in args.transports:
            async with OrgMemoryClient.kafka(s.kafka_bootstrap_servers, namespace=s.topic_namespace, timeout=30) as om:

                async def over_kafka(q: str, v: Viewer) -> None:
                    await om.retrieve_context({"query": q}, principal_id=v.principal_id, groups=v.groups)

                result["kafka_rpc"] = await measure(over_kafka, queries, args.concurrency)
        result["dense_recall"] = await dense_recall(rt, org, texts, rng)
        if getattr(args, "lexical_queries", 0):
            result["lexical_quality"] = await lexical_overlap(rt, org, texts, rng, args.lexical_queries)
        async with rt.pool.acquire() as conn:
            audits = await conn.fetch("SELECT diagnostics FROM retrieval_audit")
        per_step: dict[str, list[float]] = {}
        for row in audits:
            for step, ms in (json.loads(row["diagnostics"]).get("timings_ms") or {}).items():
                per_step.setdefault(step, []).append(float(ms))
        result["median_step_ms"] = {step: round(statistics.median(v), 2) for step, v in sorted(per_step.items())}
    finally:
        await stop_runtime(rt)
        if not args.keep:
            conn = await asyncpg.connect(s.database_url)
            await conn.execute(f"DROP SCHEMA {quote_ident(s.db_schema)} CASCADE")
            await conn.close()
        hier.unlink(missing_ok=True)
    return result


async def http_transport(rt: Any, queries: list[tuple[str, Viewer]], args: argparse.Namespace) -> dict[str, Any]:
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(rt),
            host="127.0.0.1",
            port=args.port,
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
    )
    serve_task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{args.port}", timeout=30) as http:

        async def over_http(q: str, v: Viewer) -> None:
            r = await http.post(
                "/tools/retrieve_context",
                json={"query": q},
                headers={
                    "X-Api-Key": "bench-key",
                    "X-Principal-Id": v.principal_id or "",
                    "X-Principal-Groups": ",".join(v.groups),
                },
            )
            r.raise_for_status()

        stats_http = await measure(over_http, queries, args.concurrency)
    server.should_exit = True
    await serve_task
    return stats_http


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--port", type=int, default=18777)
    ap.add_argument("--keep", action="store_true", help="keep the bench schemas")
    ap.add_argument("--lexical-queries", type=int, default=50, help="queries comparing the lexical arm with exact BM25")
    ap.add_argument("--corpus", help="events.jsonl whose texts to index instead of the synthetic corpus")
    ap.add_argument("--transports", default="in_process,http,kafka", help="which of http,kafka to measure too")
    args = ap.parse_args()
    base = load_settings(_env_file=".env")
    report: dict[str, Any] = {
        "benchmark": "retrieve_context",
        "at": datetime.now(UTC).isoformat(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "embedder": "hash (384)",
        "viewer": "random user + its team group (sees ~18% of documents)",
        "corpus": args.corpus or "synthetic",
        "targets": {"p50_ms": 30, "p95_ms": 100},
        "sizes": [await bench_size(base, int(n), args) for n in args.sizes.split(",")],
    }
    out = Path(__file__).parent / "results" / f"retrieve-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
