"""Ids looked up by a (kind, key) text pair: person aliases by (namespace, value), entity aliases by (type,
alias). One statement per batch, the pairs sent as two parallel arrays, so a batch of N keys is one round trip."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import asyncpg

PAIR_IN = "IN (SELECT * FROM unnest($2::text[], $3::text[]))"
"""The membership test of a pair column, ``(a, b) {PAIR_IN}``: ``$2`` and ``$3`` are the pairs' halves."""


async def ids_by_pair(
    conn: asyncpg.Connection, sql: str, workspace: str, keys: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], uuid.UUID]:
    """Run ``sql`` (``$1`` the workspace; selecting the pair's two columns, then the id) over the distinct
    ``keys``; no statement at all when there are none."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    rows = await conn.fetch(sql, workspace, [k[0] for k in wanted], [k[1] for k in wanted])
    return {(r[0], r[1]): r[2] for r in rows}
