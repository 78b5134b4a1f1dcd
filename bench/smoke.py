"""``make bench``: a ~3-minute smoke of every speed figure, one JSON line each, its target beside it.

    .venv/bin/python bench/smoke.py [--only embed,ingest,freshness,retrieve] [--provider bge]

Lines look like ``{"figure": "ingest_envelopes_per_s", "value": 2410, "target": ">= 3000", "ok": false, ...}``.
The figures are small samples (seconds, not minutes) so a change that costs speed shows at once; the full
benchmarks (``make bench-ingest``, ``bench-retrieve``, ``bench-embed``, ``bench/pipeline_bench.py``) give the
numbers the README quotes. Ratios are taken within this run: "in-stage / standalone embed" (the embed stage among
all stages vs the same provider alone on the same texts) and "ingest / Postgres COPY ceiling" (the ingest stage
vs a plain COPY of the same number of 1 KB rows with a tsvector, into the same Postgres, just before).
``ingest_two_workers_over_one``: two ``orgmem run --stage ingest`` processes over one on the same envelopes, with
the CPU seconds of the workers, their Postgres backends and the broker (``bench/ingest_scaling.py``).
The machine's load average is printed first: on a shared box compare lines taken back to back.
Everything is also written to bench/results/smoke-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
import uuid
from datetime import timedelta
from typing import Any

import asyncpg
from common import drop, isolated_settings, write_result
from ingest_bench import T0, WORDS, bench_latency, wait_count
from ingest_scaling import two_over_one
from pipeline_bench import DEFAULT_DATASET
from pipeline_bench import run as pipeline_run

from schemas.envelope import ChangeEnvelope
from services.db.pool import quote_ident
from services.ops.replay import replay
from services.producer import EnvelopeProducer
from services.serve import start_runtime, stop_runtime
from services.settings import Settings, load_settings
from services.stages import available_stages

LINES: list[dict[str, Any]] = []


def emit(figure: str, value: float, target: str, ok: bool, **extra: Any) -> None:
    line = {"figure": figure, "value": value, "target": target, "ok": ok, **extra}
    LINES.append(line)
    print(json.dumps(line), flush=True)


def kb_envelopes(n: int, seed: int = 3) -> list[ChangeEnvelope]:
    """``n`` chat messages of ~1 KB (the issue's ingest target is stated for 1 KB messages)."""
    rnd = random.Random(seed)
    groups = [f"group:{uuid.UUID(int=rnd.getrandbits(128))}" for _ in range(20)]
    out = []
    for i in range(n):
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < 1000:
            words.append(rnd.choice(WORDS) + str(rnd.randint(0, 999)))
        out.append(
            ChangeEnvelope.model_validate(
                {
                    "envelope_id": str(uuid.UUID(int=rnd.getrandbits(128))),
                    "workspace": "default",
                    "source": {"system": "slack", "external_id": f"C{i % 50}/{i}"},
                    "event_time": (T0 + timedelta(seconds=i)).isoformat(),
                    "document": {"kind": "message", "text": " ".join(words)},
                    "author": {"email": f"person{rnd.randint(0, 199)}@bench.example"},
                    "acl": {"principals": [rnd.choice(groups)]},
                }
            )
        )
    return out


async def copy_ceiling(settings: Settings, envs: list[ChangeEnvelope]) -> float:
    """Rows/s of a plain COPY of the envelopes' texts into a table with a generated English tsvector."""
    conn = await asyncpg.connect(settings.database_url)
    table = f"{quote_ident(settings.db_schema)}.copy_ceiling"
    try:
        await conn.execute(
            f"CREATE TABLE {table} (id uuid PRIMARY KEY, text text NOT NULL,"
            " tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED)"
        )
        await conn.execute(f"CREATE INDEX ON {table} USING gin (tsv)")
        rows = [(uuid.uuid4(), e.document.text if e.document else "") for e in envs]
        t = time.perf_counter()
        await conn.copy_records_to_table(
            "copy_ceiling", schema_name=settings.db_schema, records=rows, columns=["id", "text"]
        )
        return len(rows) / (time.perf_counter() - t)
    finally:
        await conn.execute(f"DROP TABLE IF EXISTS {table}")
        await conn.close()


async def ingest_figures(n: int) -> None:
    settings = await isolated_settings("smk")
    envs = kb_envelopes(n)
    ceiling = await copy_ceiling(settings, envs)
    async with EnvelopeProducer(settings.kafka_bootstrap_servers, topic=settings.topic("envelopes")) as p:
        await p.send_many(envs)
    rt = await start_runtime(settings, ["ingest"])
    try:
        secs = await wait_count(settings, "SELECT count(*) FROM processed_events WHERE stage='ingest'", n, 600)
    finally:
        await stop_runtime(rt)
    rate = n / secs
    emit("ingest_envelopes_per_s", round(rate), ">= 3000", rate >= 3000, envelopes=n, message_bytes=1000)
    emit("postgres_copy_ceiling_rows_per_s", round(ceiling), "(yardstick)", True, rows=n)
    emit("ingest_over_copy_ceiling", round(rate / ceiling, 3), "(ratio)", True)
    try:
        res = await replay(settings, "ingest", start=None)
    finally:
        await drop(settings)
    emit("replay_envelopes_per_s", round(res.per_second), ">= 4000", res.per_second >= 4000, envelopes=n)
    one, two = await two_over_one(envs)
    ratio = round(two["envelopes_per_s"] / max(1, one["envelopes_per_s"]), 2)
    emit(
        "ingest_two_workers_over_one",
        ratio,
        f"(<= 2; {os.cpu_count()} cores shared by workers, Postgres and the broker bound it)",
        True,
        one_worker=one,
        two_workers=two,
    )


async def freshness_figures(seconds: int, provider: str) -> None:
    lex = await bench_latency(200, seconds, until="lexical")
    emit("lexical_fresh_p95_ms_at_200_per_s", lex["p95_ms"], "<= 500", lex["p95_ms"] <= 500, p50_ms=lex["p50_ms"])
    dense_hash = await bench_latency(200, seconds, provider="hash")
    emit(
        "dense_fresh_p95_ms_at_200_per_s_hash",
        dense_hash["p95_ms"],
        "<= 1000",
        dense_hash["p95_ms"] <= 1000,
        p50_ms=dense_hash["p50_ms"],
    )
    dense = await bench_latency(50, seconds, provider=provider)
    emit(
        f"dense_fresh_p95_ms_at_50_per_s_{provider}",
        dense["p95_ms"],
        "<= 2000",
        dense["p95_ms"] <= 2000,
        p50_ms=dense["p50_ms"],
    )


async def embed_figures(provider: str, events: int) -> None:
    r = await pipeline_run(provider, DEFAULT_DATASET, events, available_stages(), 1)
    ratio = r["in_stage_over_standalone"]
    rate = r["in_stage_chunks_per_s"]
    emit(f"embed_in_stage_chunks_per_s_{provider}", rate, "(all stages)", True, chunks=r["chunks"])
    emit(f"embed_standalone_chunks_per_s_{provider}", r["standalone_chunks_per_s"], "(yardstick)", True)
    emit("embed_in_stage_over_standalone", ratio, ">= 0.8", ratio >= 0.8)


async def retrieve_figures(size: int, queries: int) -> None:
    import retrieve_bench

    args = argparse.Namespace(
        queries=queries,
        concurrency=4,
        port=int(os.environ.get("ORGMEM_BENCH_PORT", "8050")),
        keep=False,
        corpus=None,
        transports="in_process,http",
        lexical_queries=20,
    )
    base = load_settings(_env_file=".env", service_api_key="bench-key")
    r = await retrieve_bench.bench_size(base, size, args)
    seq = r.get("in_process") or {}
    emit("retrieve_p50_ms", seq.get("p50_ms"), "<= 30", (seq.get("p50_ms") or 1e9) <= 30, chunks=size)
    emit("retrieve_p95_ms", seq.get("p95_ms"), "<= 100", (seq.get("p95_ms") or 1e9) <= 100, chunks=size)
    lex = r.get("lexical_quality") or {}
    if lex.get("overlap_at_10_vs_exact_bm25") is not None:
        ov = lex["overlap_at_10_vs_exact_bm25"]
        emit("lexical_overlap_at_10_vs_exact_bm25", ov, ">= 0.95", ov >= 0.95, chunks=size)
    http = r.get("http") or {}
    if http and seq:
        over = round(http["p50_ms"] - seq["p50_ms"], 1)
        emit("http_overhead_p50_ms", over, "<= 10", over <= 10)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="embed,ingest,freshness,retrieve")
    ap.add_argument("--provider", default=os.environ.get("EMBEDDING_PROVIDER", "bge"))
    args = ap.parse_args()
    parts = set(args.only.split(","))
    emit("load_average_1m", round(os.getloadavg()[0], 2), f"(machine, {os.cpu_count()} cores)", True)
    began = time.perf_counter()
    if "ingest" in parts:
        await ingest_figures(3000)
    if "freshness" in parts:
        await freshness_figures(10, args.provider)
    if "embed" in parts:
        await embed_figures(args.provider, 200)
    if "retrieve" in parts:
        await retrieve_figures(10_000, 100)
    emit("smoke_seconds", round(time.perf_counter() - began), "~180", True)
    write_result("smoke", {"benchmark": "smoke", "lines": LINES})


if __name__ == "__main__":
    asyncio.run(main())
