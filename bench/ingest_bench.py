"""Write-path benchmark (real Kafka + Postgres + S3): ``make bench-ingest``.

Measures, each on a fresh namespace (topics, consumer groups, Postgres schema, bucket):
- ingest throughput: N envelopes pre-produced, then the ingest stage drains them (envelopes/s);
- produce -> searchable latency at a steady rate: time from the produce acknowledgement until the envelope's
  child chunk is committed with its vector (dense: 200/s with the hash embedder, 50/s with the real local one,
  ``--local-provider``) or committed at all (lexical, 200/s) (p50/p95);
- embed throughput of the embed stage for the hash and the default local BGE provider (chunks/s;
  ``--embed-providers hash,bge,local`` adds MiniLM);
- replay throughput (``orgmem replay ingest --from earliest``) over the N envelopes.
Prints JSON and writes bench/results/ingest-<time>.json. Run ``--quick`` for a smoke run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from common import REPO, drop, isolated_settings, median, percentile, write_result

from schemas.envelope import ChangeEnvelope
from services.db.pool import create_pool
from services.ops.replay import replay
from services.producer import EnvelopeProducer
from services.serve import start_runtime, stop_runtime
from services.settings import Settings

WORDS = [
    "search",
    "relevance",
    "roadmap",
    "atlas",
    "compass",
    "platform",
    "latency",
    "budget",
    "migration",
    "postgres",
    "kafka",
    "vector",
    "review",
    "design",
    "launch",
    "customer",
    "churn",
    "growth",
    "onboarding",
    "incident",
    "retro",
    "hiring",
    "quarter",
    "okr",
]
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def make_envelopes(n: int, *, seed: int = 7, workspace: str = "default") -> list[ChangeEnvelope]:
    rnd = random.Random(seed)
    groups = [f"group:{uuid.UUID(int=rnd.getrandbits(128))}" for _ in range(20)]
    people = [f"person{i}@bench.example" for i in range(200)]
    out = []
    for i in range(n):
        words = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(12, 40)))
        out.append(
            ChangeEnvelope.model_validate(
                {
                    "envelope_id": str(uuid.UUID(int=rnd.getrandbits(128))),
                    "workspace": workspace,
                    "source": {"system": "slack", "external_id": f"C{i % 50}/{i}"},
                    "event_time": (T0 + timedelta(seconds=i)).isoformat(),
                    "document": {"kind": "message", "text": f"msg {i}: {words}."},
                    "author": {"email": rnd.choice(people)},
                    "acl": {"principals": [rnd.choice(groups)]},
                }
            )
        )
    return out


async def count(settings: Settings, sql: str) -> int:
    pool = await create_pool(settings, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            return int(await conn.fetchval(sql))
    finally:
        await pool.close()


async def wait_count(settings: Settings, sql: str, target: int, timeout: float) -> float:
    """Seconds from the first unit of progress to ``target`` (consumer-group join and model load excluded)."""
    began = time.perf_counter()
    first: float | None = None
    first_count = 0
    pool = await create_pool(settings, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            while time.perf_counter() - began < timeout:
                n = int(await conn.fetchval(sql))
                if n and first is None:
                    first, first_count = time.perf_counter(), n
                if n >= target:
                    assert first is not None
                    elapsed = time.perf_counter() - first
                    # extrapolate the part done before the first observation at the measured rate
                    return elapsed * target / max(1, target - first_count) if elapsed > 0 else 0.001
                await asyncio.sleep(0.02)
    finally:
        await pool.close()
    raise TimeoutError(f"{sql} did not reach {target} in {timeout}s")


async def bench_ingest(n: int, processes: int) -> dict[str, Any]:
    """``processes`` = 0: the stage in this process; N > 0: N ``orgmem run ingest`` processes (one group)."""
    settings = await isolated_settings("ing")
    envs = make_envelopes(n)
    async with EnvelopeProducer(settings.kafka_bootstrap_servers, topic=settings.topic("envelopes")) as p:
        t = time.perf_counter()
        await p.send_many(envs)
        produce_s = time.perf_counter() - t
    procs: list[subprocess.Popen[bytes]] = []
    rt = None
    if processes:
        procs = [
            subprocess.Popen(  # from this checkout: the venv's ``orgmem`` script may import another one
                [sys.executable, "-m", "services.cli", "run", "--stage", "ingest"],
                cwd=REPO,
                env={**os.environ, **settings.to_env()},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(processes)
        ]
    else:
        rt = await start_runtime(settings, ["ingest"])
    try:
        secs = await wait_count(settings, "SELECT count(*) FROM processed_events WHERE stage='ingest'", n, 600)
    finally:
        if rt is not None:
            await stop_runtime(rt)
        for proc in procs:
            proc.terminate()
            proc.wait(30)
    res = await replay(settings, "ingest", start=None)
    return {
        "envelopes": n,
        "ingest_processes": max(1, processes),
        "produce_per_s": round(n / produce_s),
        "ingest_seconds": round(secs, 2),
        "ingest_envelopes_per_s": round(n / secs),
        "replay_envelopes_per_s": round(res.per_second),
        "replay_seconds": round(res.seconds, 2),
    }


async def bench_latency(rate: int, seconds: int, *, provider: str = "hash", until: str = "dense") -> dict[str, Any]:
    """Produce at a steady ``rate``; time produce ack -> chunk committed with its vector (``until="dense"``) or
    committed at all, i.e. lexically searchable (``until="lexical"``; the tsvector is written with the row)."""
    settings = await isolated_settings("lat", embedding_provider=provider)
    rt = await start_runtime(settings, ["ingest", "embed"] if until == "dense" else ["ingest"])
    ready = "c.embedding IS NOT NULL" if until == "dense" else "c.tsv IS NOT NULL"
    envs = make_envelopes(rate * seconds, seed=11)
    sent_at: dict[str, float] = {}
    seen_at: dict[str, float] = {}
    pool = await create_pool(settings, min_size=1, max_size=2)

    async def poll() -> None:
        async with pool.acquire() as conn:
            while len(seen_at) < len(envs):
                rows = await conn.fetch(
                    "SELECT d.external_id FROM chunks c JOIN documents d ON d.id = c.document_id"
                    f" WHERE NOT c.is_parent AND {ready} AND d.external_id = ANY($1::text[])",
                    [k for k in sent_at if k not in seen_at],
                )
                now = time.perf_counter()
                for r in rows:
                    seen_at.setdefault(r["external_id"], now)
                await asyncio.sleep(0.02)

    try:
        poller = asyncio.create_task(poll())
        async with EnvelopeProducer(
            settings.kafka_bootstrap_servers, topic=settings.topic("envelopes"), linger_ms=0
        ) as p:
            began = time.perf_counter()
            for i, env in enumerate(envs):
                due = began + i / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                rec = await p.send(env)
                sent_at[env.source.external_id] = time.perf_counter()
                del rec
        await asyncio.wait_for(poller, 120)
    finally:
        await pool.close()
        await stop_runtime(rt)
        await drop(settings)
    lat = [(seen_at[k] - sent_at[k]) * 1000 for k in sent_at]
    return {
        "rate_per_s": rate,
        "envelopes": len(envs),
        "p50_ms": round(percentile(lat, 50), 1),
        "p95_ms": round(percentile(lat, 95), 1),
        "p99_ms": round(percentile(lat, 99), 1),
        "max_ms": round(max(lat), 1),
        "embedder": provider,
        "until": until,
    }


async def bench_embed(provider: str, n: int) -> dict[str, Any]:
    settings = await isolated_settings("emb", embedding_provider=provider)
    envs = make_envelopes(n, seed=5)
    async with EnvelopeProducer(settings.kafka_bootstrap_servers, topic=settings.topic("envelopes")) as p:
        await p.send_many(envs)
    rt = await start_runtime(settings, ["ingest"])
    try:
        await wait_count(settings, "SELECT count(*) FROM processed_events WHERE stage='ingest'", n, 600)
    finally:
        await stop_runtime(rt)
    rt = await start_runtime(settings, ["embed"])
    try:
        secs = await wait_count(
            settings, "SELECT count(*) FROM chunks WHERE NOT is_parent AND embedding IS NOT NULL", n, 1200
        )
    finally:
        await stop_runtime(rt)
    return {"provider": provider, "chunks": n, "seconds": round(secs, 2), "chunks_per_s": round(n / secs, 1)}


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--embed-providers", default="hash,bge", help="embed-stage providers to time (e.g. add local)")
    ap.add_argument("--local-provider", default="bge", help="the real embedder of the 50/s freshness run")
    args = ap.parse_args()
    n = 2000 if args.quick else 20000
    runs = 1 if args.quick else args.runs
    ingest = [await bench_ingest(n, 0) for _ in range(runs)]
    ingest_2p = [await bench_ingest(n, 2) for _ in range(runs)]
    secs = 5 if args.quick else 30
    latency = await bench_latency(200, secs)
    lexical = await bench_latency(200, secs, until="lexical")
    dense_local = await bench_latency(50, secs, provider=args.local_provider)
    embed_stage = [
        await bench_embed(p, (1000 if args.quick else 5000) if p == "hash" else (200 if args.quick else 1000))
        for p in args.embed_providers.split(",")
    ]
    result = {
        "benchmark": "ingest",
        "machine_note": "2 cores / 24 GB; medians over runs",
        "ingest_envelopes_per_s_median": median([r["ingest_envelopes_per_s"] for r in ingest]),
        "replay_envelopes_per_s_median": median([r["replay_envelopes_per_s"] for r in ingest]),
        "ingest_envelopes_per_s_median_2_processes": median([r["ingest_envelopes_per_s"] for r in ingest_2p]),
        "ingest_runs": ingest + ingest_2p,
        "produce_to_searchable": latency,
        "produce_to_lexically_searchable": lexical,
        "produce_to_dense_searchable_real_embedder": dense_local,
        "embed_stage": embed_stage,
        "targets": {
            "ingest_envelopes_per_s": 3000,
            "replay_envelopes_per_s": 4000,
            "lexical_p95_ms_at_200_per_s": 500,
            "dense_p95_ms_at_200_per_s_hash": 1000,
            "dense_p95_ms_at_50_per_s_real_embedder": 2000,
        },
    }
    write_result("ingest", result)


if __name__ == "__main__":
    asyncio.run(main())
