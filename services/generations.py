"""Projection generations (blue/green rebuilds).

The active generation of a deployment (keyed by its base ``DB_SCHEMA``) is one row in
``public.orgmem_generations``: the Postgres schema readers and writers use, the consumer-group
prefix and the internal-topic generation. No row = generation 0 (the base schema, base groups).
``orgmem rebuild`` fills a fresh generation from ``om.envelopes.v1`` and switches this row only once
the new generation has caught up; running processes notice within ``POLL_S`` and restart their
runtime on the new generation (the API keeps serving; requests see the new projection).
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from services.settings import Settings

POLL_S = 3.0
DDL = (
    "CREATE TABLE IF NOT EXISTS public.orgmem_generations ("
    " base_schema text PRIMARY KEY, generation text NOT NULL, db_schema text NOT NULL,"
    " group_prefix text NOT NULL, switched_at timestamptz NOT NULL DEFAULT now())"
)


@dataclass(frozen=True, slots=True)
class Generation:
    generation: str
    db_schema: str
    group_prefix: str


def base_generation(settings: Settings) -> Generation:
    return Generation("", settings.db_schema, settings.group_prefix)


async def active_generation(conn: asyncpg.Connection, settings: Settings) -> Generation:
    exists = await conn.fetchval("SELECT to_regclass('public.orgmem_generations') IS NOT NULL")
    if not exists:
        return base_generation(settings)
    row = await conn.fetchrow(
        "SELECT generation, db_schema, group_prefix FROM public.orgmem_generations WHERE base_schema = $1",
        settings.db_schema,
    )
    if row is None:
        return base_generation(settings)
    return Generation(row["generation"], row["db_schema"], row["group_prefix"])


def apply_generation(settings: Settings, gen: Generation) -> Settings:
    """Settings of the base deployment moved onto ``gen`` (schema, groups, internal topics)."""
    if not gen.generation:
        return settings
    return settings.model_copy(
        update={"db_schema": gen.db_schema, "group_prefix": gen.group_prefix, "generation": gen.generation}
    )


async def resolve(settings: Settings) -> Settings:
    """The settings this process should run with right now (active generation applied)."""
    conn = await asyncpg.connect(settings.database_url)
    try:
        return apply_generation(settings, await active_generation(conn, settings))
    finally:
        await conn.close()


async def switch(conn: asyncpg.Connection, base: Settings, gen: Generation) -> None:
    await conn.execute(DDL)
    await conn.execute(
        "INSERT INTO public.orgmem_generations (base_schema, generation, db_schema, group_prefix)"
        " VALUES ($1, $2, $3, $4) ON CONFLICT (base_schema) DO UPDATE SET generation = EXCLUDED.generation,"
        " db_schema = EXCLUDED.db_schema, group_prefix = EXCLUDED.group_prefix, switched_at = now()",
        base.db_schema,
        gen.generation,
        gen.db_schema,
        gen.group_prefix,
    )


async def next_generation(conn: asyncpg.Connection, base: Settings) -> Generation:
    current = await active_generation(conn, base)
    n = int(current.generation[1:]) + 1 if current.generation.startswith("g") else 1
    while await conn.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", f"{base.db_schema}_g{n}"):
        n += 1
    return Generation(f"g{n}", f"{base.db_schema}_g{n}", f"{base.group_prefix}g{n}-")
