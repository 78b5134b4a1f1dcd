"""SQL of the collaboration stage (asyncpg): per-document contributions and the edges aggregated from them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from services.collaboration.weights import THREAD_HORIZON, THREAD_WINDOW
from services.decay import decay_sql

STAGE = "collab"


async def load_documents(conn: asyncpg.Connection, ids: Sequence[uuid.UUID]) -> list[asyncpg.Record]:
    """Documents with their (merge-resolved) author and participants."""
    return list(
        await conn.fetch(
            "SELECT d.id, d.workspace, d.source_system, d.thread_external_id, d.event_time, d.deleted_at,"
            " (SELECT COALESCE(p.merged_into, p.id) FROM people p WHERE p.id = d.author_person_id) AS author,"
            " ARRAY(SELECT DISTINCT COALESCE(p.merged_into, p.id) FROM participants x JOIN people p"
            "       ON p.id = x.person_id WHERE x.document_id = d.id) AS participants"
            " FROM documents d WHERE d.id = ANY($1::uuid[])",
            list(ids),
        )
    )


async def thread_authors(conn: asyncpg.Connection, doc: asyncpg.Record) -> list[uuid.UUID]:
    """Authors of up to THREAD_WINDOW earlier live documents of the same thread within THREAD_HORIZON."""
    if doc["thread_external_id"] is None:
        return []
    rows = await conn.fetch(
        "SELECT COALESCE(p.merged_into, p.id) AS author FROM documents d JOIN people p ON p.id ="
        " d.author_person_id"
        " WHERE d.workspace = $1 AND d.source_system = $2 AND d.thread_external_id = $3 AND d.id <> $4"
        " AND d.deleted_at IS NULL AND d.event_time < $5 AND d.event_time >= $6"
        " ORDER BY d.event_time DESC LIMIT $7",
        doc["workspace"],
        doc["source_system"],
        doc["thread_external_id"],
        doc["id"],
        doc["event_time"],
        doc["event_time"] - THREAD_HORIZON,
        THREAD_WINDOW,
    )
    return [r["author"] for r in rows]


async def replace_contributions(
    conn: asyncpg.Connection, doc_ids: Sequence[uuid.UUID], rows: Sequence[tuple[Any, ...]]
) -> list[tuple[str, uuid.UUID, uuid.UUID]]:
    """rows: (document_id, workspace, a_id, b_id, reason, weight, event_time). Returns every touched pair."""
    old = await conn.fetch(
        "DELETE FROM collab_contributions WHERE document_id = ANY($1::uuid[]) RETURNING workspace, a_id, b_id",
        list(doc_ids),
    )
    if rows:
        await conn.executemany(
            "INSERT INTO collab_contributions (document_id, workspace, a_kind, a_id, b_kind, b_id, reason,"
            " weight,"
            " event_time) VALUES ($1, $2, 'person', $3, 'person', $4, $5, $6, $7) ON CONFLICT DO NOTHING",
            rows,
        )
    touched = {(r["workspace"], r["a_id"], r["b_id"]) for r in old} | {(r[1], r[2], r[3]) for r in rows}
    return sorted(touched, key=str)


async def refresh_edges(
    conn: asyncpg.Connection, pairs: Sequence[tuple[str, uuid.UUID, uuid.UUID]], half_life_days: float
) -> None:
    """Recompute the touched edges from their contributions (replays never double count)."""
    if not pairs:
        return
    ws, a, b = [p[0] for p in pairs], [p[1] for p in pairs], [p[2] for p in pairs]
    await conn.execute(
        "DELETE FROM collaboration_edges e USING unnest($1::text[], $2::uuid[], $3::uuid[]) AS k(w, a, b)"
        " WHERE e.workspace = k.w AND e.a_id = k.a AND e.b_id = k.b",
        ws,
        a,
        b,
    )
    await conn.execute(
        "INSERT INTO collaboration_edges (workspace, a_kind, a_id, b_kind, b_id, count, last_seen, weight)"
        " SELECT workspace, 'person', a_id, 'person', b_id, count(*), max(event_time),"
        f" sum({decay_sql('weight', 'last', 'event_time', '$4')})"
        " FROM (SELECT c.*, max(c.event_time) OVER (PARTITION BY c.workspace, c.a_id, c.b_id) AS last"
        "       FROM collab_contributions c JOIN unnest($1::text[], $2::uuid[], $3::uuid[]) AS k(w, a, b)"
        "       ON c.workspace = k.w AND c.a_id = k.a AND c.b_id = k.b) s"
        " GROUP BY workspace, a_id, b_id",
        ws,
        a,
        b,
        half_life_days,
    )


async def top_collaborators(
    conn: asyncpg.Connection,
    workspace: str,
    person: uuid.UUID,
    now: datetime,
    half_life_days: float,
    limit: int = 5,
) -> list[uuid.UUID]:
    """Unscoped (operator/benchmark) ranking by weight decayed to ``now``."""
    rows = await conn.fetch(
        "SELECT CASE WHEN a_id = $2 THEN b_id ELSE a_id END AS other FROM collaboration_edges"
        " WHERE workspace = $1 AND (a_id = $2 OR b_id = $2)"
        f" ORDER BY {decay_sql('weight', '$3', 'last_seen', '$4')} DESC, count DESC"
        " LIMIT $5",
        workspace,
        person,
        now,
        half_life_days,
        limit,
    )
    return [r["other"] for r in rows]
