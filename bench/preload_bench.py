"""Latency of ``POST /tools/preload`` beside ``POST /tools/retrieve_context`` on the same corpus, server and viewer
(issue target: preload p50 ≤ 1.2× retrieve_context p50, taken in the same run).

    .venv/bin/python bench/preload_bench.py [--calls 100] [--docs 300] [--memories 40] [--port 8031]

Loads ``--docs`` synthetic documents (``bench/mcp_bench.py``'s corpus) and ``--memories`` agent memories through
the real ingest and embed stages (hash embedder) into an isolated namespace, serves the API under uvicorn, warms
up, then alternates the two calls query by query. Prints one JSON object and writes
``bench/results/preload-<timestamp>.json``; the namespace is dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from bench import common
from bench.mcp_bench import WORDS, _stack_settings, corpus, serve_app
from services.api.app import create_app
from services.producer import EnvelopeProducer
from services.serve import start_runtime, stop_runtime


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from services.ops.teardown import drop_namespace

    settings = await _stack_settings()
    team, div, org = (f"group:{uuid.uuid4()}" for _ in range(3))
    user = f"user:{uuid.uuid4()}"
    rt = await start_runtime(settings, ["ingest", "embed"])
    try:
        async with EnvelopeProducer(settings.kafka_bootstrap_servers, topic=settings.topic("envelopes")) as p:
            await p.send_many(corpus(args.docs, team, div, org, user))
        headers = {"X-Api-Key": "bench-key", "X-Principal-Id": user, "X-Principal-Groups": f"{team},{div},{org}"}
        rnd = random.Random(11)
        pre_ms: list[float] = []
        rc_ms: list[float] = []
        items = 0
        async with (
            serve_app(create_app(rt), port=args.port) as url,
            httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http,
        ):
            for i in range(args.memories):
                text = f"Memory {i}: " + " ".join(rnd.choice(WORDS) for _ in range(12))
                src = {"agent": "bench", "session_id": f"s{i}", "event_id": "e"}
                (await http.post("/v1/memories", json={"text": text, "source": src})).raise_for_status()
            want = args.docs + args.memories
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                async with rt.pool.acquire() as conn:
                    n = await conn.fetchval("SELECT count(*) FROM chunks WHERE NOT is_parent AND embedding IS NOT NULL")
                if n >= want:
                    break
                await asyncio.sleep(0.5)
            queries = [" ".join(random.Random(i).sample(WORDS, 3)) for i in range(args.calls)]
            for q in queries[:10]:  # warm-up
                await http.post("/tools/preload", json={"text": q})
                await http.post("/tools/retrieve_context", json={"query": q})
            for q in queries:
                t0 = time.perf_counter()
                r = await http.post("/tools/preload", json={"text": q})
                pre_ms.append((time.perf_counter() - t0) * 1000)
                r.raise_for_status()
                items += len(r.json()["items"])
                t0 = time.perf_counter()
                h = await http.post("/tools/retrieve_context", json={"query": q, "limit": 10})
                rc_ms.append((time.perf_counter() - t0) * 1000)
                h.raise_for_status()
    finally:
        await stop_runtime(rt)
        await drop_namespace(
            settings.database_url,
            settings.kafka_bootstrap_servers,
            schema=settings.db_schema,
            namespace=settings.topic_namespace,
        )
    ratio = common.median(pre_ms) / common.median(rc_ms)
    return {
        "benchmark": "preload_vs_retrieve_context",
        "calls": args.calls,
        "docs": args.docs,
        "memories": args.memories,
        "mean_items_per_preload": round(items / max(1, len(pre_ms)), 2),
        "preload_ms": {"median": round(common.median(pre_ms), 2), "p95": round(common.percentile(pre_ms, 95), 2)},
        "retrieve_context_ms": {
            "median": round(common.median(rc_ms), 2),
            "p95": round(common.percentile(rc_ms, 95), 2),
        },
        "p50_ratio": round(ratio, 3),
        "target_p50_ratio": 1.2,
        "meets_target": ratio <= 1.2,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "embedder": "hash",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--memories", type=int, default=40)
    ap.add_argument("--port", type=int, default=8031)
    result = asyncio.run(run(ap.parse_args()))
    common.write_result("preload", result)
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
