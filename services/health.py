"""Infrastructure checks shared by ``GET /readyz`` and ``orgmem status``."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import asyncpg

from services.kafka.clients import kafka_admin
from services.objectstore.port import ObjectStore

CHECK_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    latency_ms: float


async def _timed(name: str, coro: object) -> Check:
    start = time.perf_counter()
    try:
        detail: object = await asyncio.wait_for(coro, CHECK_TIMEOUT_S)  # type: ignore[arg-type]
        return Check(name, True, str(detail or "ok"), (time.perf_counter() - start) * 1000)
    except Exception as exc:  # a readiness probe reports every failure, whatever its type
        return Check(name, False, f"{type(exc).__name__}: {exc}"[:300], (time.perf_counter() - start) * 1000)


async def check_postgres(pool: asyncpg.Pool) -> str:
    async with pool.acquire() as conn:
        await conn.fetchval("SELECT 1")
    return "ok"


async def check_store(store: ObjectStore) -> str:
    await store.ping()
    return store.backend


async def check_kafka(bootstrap: str) -> str:
    async with kafka_admin(bootstrap, request_timeout_ms=4000) as admin:
        topics = await admin.list_topics()
        return f"{len(topics)} topics"


async def readiness(pool: asyncpg.Pool, store: ObjectStore, bootstrap: str) -> list[Check]:
    return list(
        await asyncio.gather(
            _timed("postgres", check_postgres(pool)),
            _timed("object_store", check_store(store)),
            _timed("kafka", check_kafka(bootstrap)),
        )
    )
