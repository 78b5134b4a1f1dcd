"""The embed stage inside the whole pipeline vs its model alone, on the same texts, in the same run.

    .venv/bin/python bench/pipeline_bench.py [--provider bge] [--events 1000] [--runs 1]
        [--dataset ../shared/data/locomo] [--stages all]

What a new user feels after ``make up``: LoCoMo turns (or ``--events`` of them) are produced to a fresh namespace,
every stage starts in this one process (``--stages all``, as ``orgmem up`` runs them), and the clock runs until
every child chunk has its vector. Then the same chunk texts (``embedding_input(title, index_context, text)``, as
the stage embeds them) go through the same provider alone, in batches of the stage's size. Reported:

- ``ingest_embed_seconds``: start of the stages -> last vector committed (consumer-group joins included);
- ``in_stage_chunks_per_s``: chunks / (last vector - first vector);
- ``standalone_chunks_per_s``: the provider alone on the same texts (median of ``--runs``), the best of the
  stage's settings and (``bge``) onnxruntime's default (one thread per core) and 1 thread, each in
  ``standalone_by_setting``;
- ``in_stage_over_standalone``: the ratio (target >= 0.8).

Prints JSON (one line per figure with ``--lines``) and writes bench/results/pipeline-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import REPO, drop, isolated_settings, write_result

from embedder.providers import build_embedder
from services.chunk_embedding import embedding_input
from services.db.pool import create_pool
from services.embedding_config import provider_kwargs
from services.eval.datasets import iter_envelopes
from services.producer import EnvelopeProducer
from services.serve import start_runtime, stop_runtime
from services.settings import Settings
from services.stages import available_stages

DEFAULT_DATASET = REPO.parent / "shared" / "data" / "locomo"
if not DEFAULT_DATASET.exists():
    DEFAULT_DATASET = Path("/work/shared/data/locomo")


async def _progress(settings: Settings, produced: int, timeout: float, every: float = 0.25) -> dict[str, float]:
    """Poll until all produced envelopes are ingested and every child chunk has a vector. Each poll scans the
    namespace's chunks in the Postgres the stages use: polled too often it takes CPU from the stage it times."""
    began = time.perf_counter()
    first_vec: float | None = None
    first_n = 0
    ingested_at: float | None = None
    pool = await create_pool(settings, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            while time.perf_counter() - began < timeout:
                row = await conn.fetchrow(
                    "SELECT (SELECT count(*) FROM processed_events WHERE stage = 'ingest') AS ingested,"
                    " count(*) FILTER (WHERE embedding IS NOT NULL) AS done,"
                    " count(*) FILTER (WHERE embedding IS NULL) AS todo"
                    " FROM chunks WHERE NOT is_parent AND NOT deleted"
                )
                now = time.perf_counter()
                if row["done"] and first_vec is None:
                    first_vec, first_n = now, int(row["done"])
                if ingested_at is None and row["ingested"] >= produced:
                    ingested_at = now
                if ingested_at is not None and row["todo"] == 0 and first_vec is not None:
                    done = int(row["done"])
                    span = now - first_vec
                    rate = (done - first_n) / span if span > 0 and done > first_n else float("nan")
                    return {
                        "chunks": done,
                        "ingest_seconds": round(ingested_at - began, 2),
                        "ingest_embed_seconds": round(now - began, 2),
                        "in_stage_chunks_per_s": round(rate, 1),
                    }
                await asyncio.sleep(every)
    finally:
        await pool.close()
    raise TimeoutError(f"pipeline did not drain {produced} envelopes in {timeout}s")


async def _standalone(settings: Settings, provider: str, runs: int, limit: int | None = None) -> dict[str, float]:
    """Chunks/s of the provider alone on the stage's texts, per onnxruntime thread count for ``bge``
    (the stage's setting, onnxruntime's default and 1 thread), else with the stage's settings."""
    pool = await create_pool(settings, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT title, index_context, text FROM chunks WHERE NOT is_parent AND NOT deleted ORDER BY id"
            )
    finally:
        await pool.close()
    texts = [embedding_input(r["title"], r["index_context"], r["text"]) for r in rows][:limit]
    stage_kwargs = provider_kwargs(settings)
    variants: dict[str, dict[str, Any]] = {"stage": stage_kwargs}
    if provider == "bge":  # keyed by thread count: the stage's own setting is one of them
        variants = {
            f"threads_{n}": {**stage_kwargs, "intra_op_num_threads": n}
            for n in dict.fromkeys((stage_kwargs["intra_op_num_threads"], 0, 1))
        }
    out: dict[str, float] = {}
    for name, kwargs in variants.items():
        embedder = build_embedder(provider, **kwargs)
        try:
            await embedder.embed(texts)  # warm-up over every text: onnxruntime's first run of a shape is slower
            rates = []
            for _ in range(runs):
                t = time.perf_counter()
                await embedder.embed(texts)
                rates.append(len(texts) / (time.perf_counter() - t))
        finally:
            await embedder.aclose()
        out[name] = round(statistics.median(rates), 1)
    return out


def _embed_worker(settings: Settings) -> subprocess.Popen[bytes]:
    """The embed stage as its own ``orgmem run --stage embed`` process (this checkout's code), the others here."""
    return subprocess.Popen(
        [sys.executable, "-m", "services.cli", "run", "--stage", "embed"],
        cwd=REPO,
        env={**os.environ, **settings.to_env()},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def run(
    provider: str,
    dataset: Path,
    events: int | None,
    stages: list[str],
    runs: int,
    standalone_texts: int | None = None,
    embed_process: bool = False,
) -> dict[str, Any]:
    settings = await isolated_settings("pipe", embedding_provider=provider)
    envs = list(iter_envelopes(dataset, workspace="default", limit=events))
    async with EnvelopeProducer(settings.kafka_bootstrap_servers, topic=settings.topic("envelopes")) as p:
        await p.send_many(envs)
    load_before = os.getloadavg()[0]
    apart = embed_process and "embed" in stages
    try:
        worker = _embed_worker(settings) if apart else None
        rt = await start_runtime(settings, [s for s in stages if not (apart and s == "embed")])
        try:
            stage = await _progress(settings, len(envs), 1800, float(os.environ.get("PIPELINE_POLL_S", "0.25")))
        finally:
            await stop_runtime(rt)
            if worker is not None:
                worker.terminate()
                worker.wait(30)
        alone = await _standalone(settings, provider, runs, standalone_texts)
    finally:
        await drop(settings)
    return {
        "provider": provider,
        "dataset": dataset.name,
        "envelopes": len(envs),
        "stages": stages,
        **stage,
        "embed_worker": settings.embed_worker,
        "embed_stage_process": "own" if apart else "shared",
        "embed_threads": settings.embed_threads,
        # the yardstick is the model's best rate alone (any thread count), not the stage's own setting
        "standalone_chunks_per_s": max(alone.values()),
        "standalone_by_setting": alone,
        "in_stage_over_standalone": round(stage["in_stage_chunks_per_s"] / max(alone.values()), 3),
        "load_average_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--provider", default="bge", help="embedding provider (default: the product's, bge)")
    ap.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    ap.add_argument("--events", type=int, default=None, help="first N events of the dataset (default: all)")
    ap.add_argument("--stages", default="all", help="comma-separated stages, or all (as orgmem up)")
    ap.add_argument("--runs", type=int, default=1, help="standalone timing runs (median)")
    ap.add_argument("--embed-process", action="store_true", help="the embed stage in its own process")
    ap.add_argument("--standalone-texts", type=int, default=None, help="first N chunk texts for the yardstick")
    args = ap.parse_args()
    stages = available_stages() if args.stages == "all" else args.stages.split(",")
    result = await run(
        args.provider, args.dataset, args.events, stages, args.runs, args.standalone_texts, args.embed_process
    )
    write_result("pipeline", {"benchmark": "pipeline", **result})
    print(json.dumps({"figure": "in_stage_over_standalone_embed", "value": result["in_stage_over_standalone"]}))


if __name__ == "__main__":
    asyncio.run(main())
