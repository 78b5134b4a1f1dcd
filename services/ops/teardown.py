"""Remove what one throwaway namespace left behind: its Postgres schema (with the rebuild generations
``<schema>_g<N>`` and their ``public.orgmem_generations`` row) and every Kafka topic under
``<namespace>.``. Used after an evaluation run and after each integration test, so repeated runs do
not pile thousands of partitions onto the local broker (which slows every later broker start).

Only ever called with a run's own names; an empty namespace or the deployment's default names are
refused, never treated as "everything".
"""

from __future__ import annotations

import logging

import asyncpg

from services.db.pool import quote_ident
from services.kafka.clients import kafka_admin

log = logging.getLogger("orgmem.teardown")
PROTECTED_SCHEMAS = frozenset({"public", "orgmem"})
PROTECTED_NAMESPACES = frozenset({"", "om"})


async def drop_schema(database_url: str, schema: str) -> None:
    if schema in PROTECTED_SCHEMAS or not schema:
        raise ValueError(f"refusing to drop schema {schema!r}")
    conn = await asyncpg.connect(database_url)
    try:
        generations = await conn.fetch(
            "SELECT nspname FROM pg_namespace WHERE nspname ~ ('^' || $1 || '_g[0-9]+$')", schema
        )
        for name in [schema, *(r["nspname"] for r in generations)]:
            await conn.execute(f"DROP SCHEMA IF EXISTS {quote_ident(name)} CASCADE")
        if await conn.fetchval("SELECT to_regclass('public.orgmem_generations') IS NOT NULL"):
            await conn.execute("DELETE FROM public.orgmem_generations WHERE base_schema = $1", schema)
    finally:
        await conn.close()


async def delete_topics(bootstrap_servers: str, namespace: str) -> int:
    """Delete every topic named ``<namespace>.…``; returns how many. Best effort: a broker that is
    gone or refuses is logged, not raised (leftover topics are harmless, only wasteful)."""
    if namespace in PROTECTED_NAMESPACES:
        raise ValueError(f"refusing to delete the topics of namespace {namespace!r}")
    try:
        async with kafka_admin(bootstrap_servers, request_timeout_ms=10_000) as admin:
            names = [t for t in await admin.list_topics() if t.startswith(f"{namespace}.")]
            if names:
                await admin.delete_topics(names)
            return len(names)
    except Exception as exc:
        log.warning("could not delete the topics of %s: %s", namespace, exc)
        return 0


async def drop_namespace(database_url: str, bootstrap_servers: str, *, schema: str, namespace: str) -> None:
    await drop_schema(database_url, schema)
    await delete_topics(bootstrap_servers, namespace)
