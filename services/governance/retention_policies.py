"""Retention policies: their rows (put, delete, list), the documents each would purge now (``DUE``, summarised per
workspace and cached for a minute for the health report), as :mod:`services.governance.retention` purges them."""

from __future__ import annotations

import time
from typing import Any

import asyncpg

from services.governance.holds import HELD_BY

POLICY_COLUMNS = "workspace, source_system, kind, max_age_days, purge_tombstoned_after_days"


# The most specific policy of a document: exact source system beats '*', then exact kind beats '*'.
DUE = f"""
SELECT d.id, d.workspace, p.source_system AS p_source, p.kind AS p_kind, p.max_age_days, p.purge_tombstoned_after_days,
       CASE WHEN d.deleted_at IS NOT NULL AND p.purge_tombstoned_after_days IS NOT NULL
                 AND d.deleted_at <= now() - make_interval(days => p.purge_tombstoned_after_days)
            THEN 'tombstoned' ELSE 'max_age' END AS reason,
       EXISTS (SELECT 1 FROM legal_holds h WHERE h.released_at IS NULL AND {HELD_BY}) AS held
FROM documents d
JOIN LATERAL (
    SELECT * FROM retention_policies p
    WHERE p.workspace = d.workspace AND p.source_system IN (d.source_system, '*') AND p.kind IN (d.kind, '*')
    ORDER BY (p.source_system <> '*') DESC, (p.kind <> '*') DESC
    LIMIT 1
) p ON true
WHERE ($1::text IS NULL OR d.workspace = $1)
  AND ((d.deleted_at IS NOT NULL AND p.purge_tombstoned_after_days IS NOT NULL
        AND d.deleted_at <= now() - make_interval(days => p.purge_tombstoned_after_days))
    OR (p.max_age_days IS NOT NULL AND d.event_time <= now() - make_interval(days => p.max_age_days)))
"""


async def put_policy(conn: asyncpg.Connection, policy: dict[str, Any], actor: str) -> None:
    forget_due_summary()
    await conn.execute(
        f"INSERT INTO retention_policies ({POLICY_COLUMNS}, updated_by) VALUES ($1,$2,$3,$4,$5,$6)"
        " ON CONFLICT (workspace, source_system, kind) DO UPDATE SET max_age_days = EXCLUDED.max_age_days,"
        " purge_tombstoned_after_days = EXCLUDED.purge_tombstoned_after_days, updated_at = now(),"
        " updated_by = EXCLUDED.updated_by",
        policy["workspace"],
        policy.get("source_system", "*"),
        policy.get("kind", "*"),
        policy.get("max_age_days"),
        policy.get("purge_tombstoned_after_days"),
        actor,
    )


async def delete_policy(conn: asyncpg.Connection, workspace: str, source_system: str, kind: str) -> bool:
    forget_due_summary()
    status = await conn.execute(
        "DELETE FROM retention_policies WHERE workspace = $1 AND source_system = $2 AND kind = $3",
        workspace,
        source_system,
        kind,
    )
    return bool(status.endswith(" 1"))


async def policies(conn: asyncpg.Connection, workspace: str | None = None) -> list[dict[str, Any]]:
    rows = await conn.fetch(
        f"SELECT {POLICY_COLUMNS} FROM retention_policies WHERE $1::text IS NULL OR workspace = $1"
        " ORDER BY workspace, source_system, kind",
        workspace,
    )
    return [dict(r) for r in rows]


async def due_summary(conn: asyncpg.Connection) -> list[dict[str, Any]]:
    """Per workspace: documents due for purge and documents a hold keeps (health warnings)."""
    rows = await conn.fetch(
        f"SELECT workspace, count(*) FILTER (WHERE NOT held) AS due, count(*) FILTER (WHERE held) AS held"
        f" FROM ({DUE}) x GROUP BY workspace ORDER BY workspace",
        None,
    )
    return [dict(r) for r in rows]


_due_cache: dict[str, tuple[float, list[dict[str, Any]]]] = {}


DUE_TTL_S = 60.0


async def due_summary_cached(conn: asyncpg.Connection, schema: str) -> list[dict[str, Any]]:
    """``due_summary`` at most every ``DUE_TTL_S`` per schema (it scans every document with a policy);
    a purge or a policy / hold change in this process drops the cached answer."""
    hit = _due_cache.get(schema)
    if hit is not None and time.monotonic() - hit[0] < DUE_TTL_S:
        return hit[1]
    rows = await due_summary(conn)
    _due_cache[schema] = (time.monotonic(), rows)
    return rows


def forget_due_summary() -> None:
    _due_cache.clear()
