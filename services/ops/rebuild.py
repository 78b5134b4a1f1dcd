"""``orgmem rebuild``: a fresh projection from ``om.envelopes.v1``, switched in only once caught up.

1. pick the next generation ``gN``: schema ``<DB_SCHEMA>_gN``, consumer groups ``gN-om-*``, internal
   topics ``<ns>.gN.*.v1``; migrate the schema and create the topics;
2. run the write stages (ingest, embed, extract, conflicts, collab) on it in this process, from the
   earliest envelope — the live generation keeps serving meanwhile;
3. when every stage of the new generation has no lag (envelopes and internal topics), switch the
   active generation (``public.orgmem_generations``); running ``orgmem`` processes restart on it
   within seconds and continue from the new groups' committed offsets;
4. stop. The old schema stays until an operator drops it (``--drop-old`` is deliberately absent).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

from services import generations
from services.db.migrate import migrate
from services.governance.carryover import carry_over
from services.kafka.topics import ensure_topics
from services.serve import start_runtime, stop_runtime
from services.settings import Settings
from services.stages import projection_stages, stage_lag


@dataclass(frozen=True, slots=True)
class RebuildResult:
    generation: str
    db_schema: str
    seconds: float
    envelopes: int


async def total_lag(settings: Settings, stages: list[str]) -> tuple[int, int]:
    """(lag summed over the stages, envelopes committed by the new ingest group)."""
    lag = 0
    committed = 0
    for stage in stages:
        lg = await stage_lag(settings, stage)
        lag += lg.lag
        if stage == "ingest":
            committed = lg.committed
    return lag, committed


async def _carry(base: Settings, live: str, target: str, *, final: bool) -> None:
    """Governance state (budgets, policies, holds, purged registry, audits, spend) is not in the log."""
    conn = await asyncpg.connect(base.database_url)
    try:
        await carry_over(conn, live, target, final=final)
    finally:
        await conn.close()


async def rebuild(
    base: Settings,
    *,
    progress: Callable[[int, int], None] | None = None,
    settle_s: float = 1.0,
    timeout_s: float = 24 * 3600,
) -> RebuildResult:
    conn = await asyncpg.connect(base.database_url)
    try:
        await conn.execute(generations.DDL)
        gen = await generations.next_generation(conn, base)
    finally:
        await conn.close()
    target = generations.apply_generation(base, gen)
    await migrate(target.database_url, target.db_schema)
    live = (await generations.resolve(base)).db_schema
    await _carry(base, live, target.db_schema, final=False)  # holds and the purged registry apply now
    await ensure_topics(target)
    stages = projection_stages()
    began = time.perf_counter()
    rt = await start_runtime(target, stages, api=False)
    try:
        zero_since: float | None = None
        while time.perf_counter() - began < timeout_s:
            await asyncio.sleep(0.5)
            lag, done = await total_lag(target, stages)
            if progress:
                progress(done, done + lag)
            if (lag == 0 and done > 0) or (lag == 0 and time.perf_counter() - began > 10):
                zero_since = zero_since or time.perf_counter()
                if time.perf_counter() - zero_since >= settle_s:
                    break
            else:
                zero_since = None
        else:
            raise TimeoutError(f"generation {gen.generation} did not catch up within {timeout_s:.0f}s")
        await _carry(base, live, target.db_schema, final=True)
        conn = await asyncpg.connect(base.database_url)
        try:
            await generations.switch(conn, base, gen)
        finally:
            await conn.close()
        _, done = await total_lag(target, ["ingest"])
        return RebuildResult(gen.generation, gen.db_schema, time.perf_counter() - began, done)
    finally:
        await stop_runtime(rt)
