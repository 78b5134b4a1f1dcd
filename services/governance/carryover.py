"""Carry governance state into a rebuilt projection generation.

A rebuild replays the envelope log into a fresh schema, but budgets, retention policies, legal holds, API keys,
the purged-document registry, audits and spend are not in the log. ``carry_over`` copies them from
the live schema: configuration tables are replaced (idempotent; run before the new stages start, so
holds and the purged registry apply to the rebuild's own ingest, and again at the switch), audit rows
are appended by id (sequences moved past them), spend is added once at the switch (the rebuild's own
embedding spend is real spend too).
"""

from __future__ import annotations

import asyncpg

from services.db.pool import quote_ident

CONFIG = ("budgets", "retention_policies", "legal_holds", "purged_documents", "api_keys")
APPEND = ("retention_audit", "ingress_audit", "retrieval_audit")
ADDITIVE = {
    "spend": (("day", "workspace", "provider", "model", "purpose"), ("calls", "items", "tokens")),
    "spend_refusals": (("day", "workspace", "model", "purpose", "reason"), ("count",)),
}


async def _columns(conn: asyncpg.Connection, schema: str, table: str) -> list[str]:
    rows = await conn.fetch(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2"
        " ORDER BY ordinal_position",
        schema,
        table,
    )
    return [r["column_name"] for r in rows]


async def _shared(conn: asyncpg.Connection, src: str, dst: str, table: str) -> str | None:
    a, b = await _columns(conn, src, table), await _columns(conn, dst, table)
    cols = [c for c in b if c in a]
    return ", ".join(quote_ident(c) for c in cols) if cols else None


async def carry_over(conn: asyncpg.Connection, src: str, dst: str, *, final: bool) -> dict[str, int]:
    """Copy governance state from schema ``src`` to ``dst``; ``final`` at the switch (adds spend)."""
    if src == dst:
        return {}
    s, d = quote_ident(src), quote_ident(dst)
    copied: dict[str, int] = {}
    async with conn.transaction():
        for table in CONFIG:
            cols = await _shared(conn, src, dst, table)
            if cols is None:
                continue
            await conn.execute(f"DELETE FROM {d}.{table}")
            status = await conn.execute(f"INSERT INTO {d}.{table} ({cols}) SELECT {cols} FROM {s}.{table}")
            copied[table] = int(status.rsplit(" ", 1)[-1])
        for table in APPEND:
            cols = await _shared(conn, src, dst, table)
            if cols is None:
                continue
            status = await conn.execute(
                f"INSERT INTO {d}.{table} ({cols}) SELECT {cols} FROM {s}.{table}"
                f" WHERE id > (SELECT COALESCE(max(id), 0) FROM {d}.{table}) ORDER BY id"
            )
            copied[table] = int(status.rsplit(" ", 1)[-1])
            await conn.execute(
                f"SELECT setval(pg_get_serial_sequence('{d}.{table}', 'id'),"
                f" GREATEST((SELECT COALESCE(max(id), 0) FROM {d}.{table}), 1))"
            )
        if final:
            for table, (keys, sums) in ADDITIVE.items():
                cols = await _shared(conn, src, dst, table)
                if cols is None:
                    continue
                update = ", ".join(f"{c} = {table}.{c} + EXCLUDED.{c}" for c in sums)
                status = await conn.execute(
                    f"INSERT INTO {d}.{table} AS {table} ({cols}) SELECT {cols} FROM {s}.{table}"
                    f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {update}"
                )
                copied[table] = int(status.rsplit(" ", 1)[-1])
            copied |= await _carry_consolidations(conn, s, d)
    return copied


async def _carry_consolidations(conn: asyncpg.Connection, s: str, d: str) -> dict[str, int]:
    """Memory merges are decisions, not in the log: at the switch, copy the records whose documents the rebuild
    has and their hidden chunks (chunk and document ids are deterministic)."""
    if not await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"{d}.memory_consolidations"):
        return {}
    status = await conn.execute(
        f"INSERT INTO {d}.memory_consolidations SELECT m.* FROM {s}.memory_consolidations m"
        f" WHERE EXISTS (SELECT 1 FROM {d}.documents x WHERE x.id = m.survivor_id) ON CONFLICT (id) DO NOTHING"
    )
    hidden = await conn.execute(
        f"INSERT INTO {d}.memory_hidden SELECT h.* FROM {s}.memory_hidden h"
        f" JOIN {d}.memory_consolidations m ON m.id = h.consolidation_id ON CONFLICT (chunk_id) DO NOTHING"
    )
    return {
        "memory_consolidations": int(status.rsplit(" ", 1)[-1]),
        "consolidated_chunks": int(hidden.rsplit(" ", 1)[-1]),
    }
