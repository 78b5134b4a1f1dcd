"""Latency of MCP ``retrieve_context`` (streamable HTTP, the SDK's client, one session) beside the HTTP tool
``POST /tools/retrieve_context`` on the same corpus, the same server and the same viewer.

    .venv/bin/python bench/mcp_bench.py [--calls 100] [--docs 300] [--port 8030]

Loads ``--docs`` synthetic documents (team/division/org/private ACLs) through the real ingest and
embed stages (hash embedder) into an isolated namespace, serves the API app under uvicorn, warms up,
then alternates the two transports call by call (same query list) so drift hits both equally.
Prints one JSON object and writes ``bench/results/mcp-<timestamp>.json``. Stack: ``deploy/stack.sh env``,
or ``DATABASE_URL`` / ``KAFKA_BOOTSTRAP_SERVERS`` / ``S3_*`` from the environment when
``ORGMEM_BENCH_USE_ENV=1``. The namespace is dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import random
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import uvicorn

from bench import common
from schemas.envelope import ChangeEnvelope
from services.api.app import create_app
from services.producer import EnvelopeProducer
from services.serve import start_runtime, stop_runtime
from services.settings import Settings

WORDS = [
    "budget",
    "migration",
    "rollout",
    "incident",
    "pricing",
    "hiring",
    "audit",
    "release",
    "ledger",
    "churn",
    "retention",
    "failover",
]


def corpus(n: int, team: str, div: str, org: str, user: str) -> list[ChangeEnvelope]:
    rnd = random.Random(7)
    acls = [[team], [div], [org], [user], [f"group:{uuid.uuid4()}"]]
    out = []
    for i in range(n):
        words = " ".join(rnd.choice(WORDS) for _ in range(40))
        out.append(
            ChangeEnvelope.model_validate(
                {
                    "envelope_id": str(uuid.uuid4()),
                    "source": {"system": "slack", "external_id": f"m{i}"},
                    "event_time": "2025-03-01T10:00:00Z",
                    "document": {"kind": "message", "title": f"thread {i}", "text": f"Doc {i}: {words}."},
                    "author": {"email": f"p{i % 20}@example.com"},
                    "acl": {"principals": acls[i % len(acls)]},
                }
            )
        )
    return out


@contextlib.asynccontextmanager
async def serve_app(app: Any, port: int) -> AsyncIterator[str]:
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="on")
    )
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@contextlib.asynccontextmanager
async def mcp_session(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0)) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def _stack_settings() -> Settings:
    if os.environ.get("ORGMEM_BENCH_USE_ENV") == "1":
        orig = common.stack_env
        common.stack_env = lambda: {  # type: ignore[assignment]
            k: os.environ[k]
            for k in ("DATABASE_URL", "KAFKA_BOOTSTRAP_SERVERS", "S3_ENDPOINT", "S3_ACCESS_KEY", "S3_SECRET_KEY")
        }
        try:
            return await common.isolated_settings("mcp", topic_partitions=3)
        finally:
            common.stack_env = orig
    return await common.isolated_settings("mcp", topic_partitions=3)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from services.ops.teardown import drop_namespace

    settings = await _stack_settings()
    team, div, org = (f"group:{uuid.uuid4()}" for _ in range(3))
    user = f"user:{uuid.uuid4()}"
    rt = await start_runtime(settings, ["ingest", "embed"])
    try:
        async with EnvelopeProducer(settings.kafka_bootstrap_servers, topic=settings.topic("envelopes")) as p:
            await p.send_many(corpus(args.docs, team, div, org, user))
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            async with rt.pool.acquire() as conn:
                n = await conn.fetchval("SELECT count(*) FROM chunks WHERE NOT is_parent AND embedding IS NOT NULL")
            if n >= args.docs:
                break
            await asyncio.sleep(0.5)
        headers = {"X-Api-Key": "bench-key", "X-Principal-Id": user, "X-Principal-Groups": f"{team},{div},{org}"}
        queries = [" ".join(random.Random(i).sample(WORDS, 3)) for i in range(args.calls)]
        mcp_ms: list[float] = []
        http_ms: list[float] = []
        async with (
            serve_app(create_app(rt), port=args.port) as url,
            httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http,
            mcp_session(url, headers) as session,
        ):
            for q in queries[:10]:  # warm-up: caches, pools, lexeme statistics
                await session.call_tool("retrieve_context", {"query": q})
                await http.post("/tools/retrieve_context", json={"query": q})
            passages = 0
            for q in queries:
                t0 = time.perf_counter()
                r = await session.call_tool("retrieve_context", {"query": q, "limit": 10})
                mcp_ms.append((time.perf_counter() - t0) * 1000)
                assert not r.is_error, r.content
                passages += len((r.structured_content or {}).get("passages", []))
                t0 = time.perf_counter()
                h = await http.post("/tools/retrieve_context", json={"query": q, "limit": 10})
                http_ms.append((time.perf_counter() - t0) * 1000)
                h.raise_for_status()
    finally:
        await stop_runtime(rt)
        await drop_namespace(
            settings.database_url,
            settings.kafka_bootstrap_servers,
            schema=settings.db_schema,
            namespace=settings.topic_namespace,
        )
    return {
        "benchmark": "mcp_vs_http_retrieve_context",
        "calls": args.calls,
        "docs": args.docs,
        "viewer_sees_fraction": 0.8,
        "mean_passages_per_mcp_call": round(passages / max(1, len(queries)), 2),
        "mcp_ms": {"median": round(common.median(mcp_ms), 2), "p95": round(common.percentile(mcp_ms, 95), 2)},
        "http_ms": {"median": round(common.median(http_ms), 2), "p95": round(common.percentile(http_ms, 95), 2)},
        "mcp_overhead_ms_median": round(common.median(mcp_ms) - common.median(http_ms), 2),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "embedder": "hash",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--port", type=int, default=8030)
    result = asyncio.run(run(ap.parse_args()))
    common.write_result("mcp", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
