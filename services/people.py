"""Person lookups shared by the graph stages."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import asyncpg


async def resolve_keys(
    conn: asyncpg.Connection, workspace: str, keys: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], uuid.UUID]:
    """Identity keys -> current person id (following ``people.merged_into``)."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    rows = await conn.fetch(
        "SELECT a.namespace, a.value, COALESCE(p.merged_into, a.person_id) AS person_id"
        " FROM person_aliases a JOIN people p ON p.id = a.person_id"
        " WHERE a.workspace = $1 AND (a.namespace, a.value) IN (SELECT * FROM unnest($2::text[],"
        " $3::text[]))",
        workspace,
        [k[0] for k in wanted],
        [k[1] for k in wanted],
    )
    return {(r["namespace"], r["value"]): r["person_id"] for r in rows}
