"""Audit reads, newest first, keyset-paginated (the cursor is the last row's id)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

import asyncpg

MAX_PAGE = 500


def next_cursor(rows: list[dict[str, Any]], limit: int) -> str | None:
    return str(rows[-1]["id"]) if len(rows) == limit and rows else None


async def retrievals(
    conn: asyncpg.Connection,
    *,
    viewer: str | None,
    document: uuid.UUID | None,
    workspace: str | None,
    since: datetime | None,
    until: datetime | None,
    before_id: int | None,
    limit: int,
) -> list[dict[str, Any]]:
    rows = await conn.fetch(
        "SELECT id, at, workspace, viewer, tool, query_hash, returned_ids, returned_documents, latency_ms"
        " FROM retrieval_audit WHERE ($1::text IS NULL OR viewer = $1)"
        " AND ($2::uuid IS NULL OR returned_documents @> ARRAY[$2::uuid])"
        " AND ($3::text IS NULL OR workspace = $3) AND ($4::timestamptz IS NULL OR at >= $4)"
        " AND ($5::timestamptz IS NULL OR at < $5) AND ($6::bigint IS NULL OR id < $6)"
        " ORDER BY id DESC LIMIT $7",
        viewer,
        document,
        workspace,
        since,
        until,
        before_id,
        limit,
    )
    return [dict(r) for r in rows]


async def ingress(
    conn: asyncpg.Connection,
    *,
    workspace: str | None,
    source_system: str | None,
    external_id: str | None,
    since: datetime | None,
    until: datetime | None,
    before_id: int | None,
    limit: int,
) -> list[dict[str, Any]]:
    rows = await conn.fetch(
        'SELECT id, at, caller, envelope_id, workspace, source_system, external_id, op, topic, partition, "offset"'
        " FROM ingress_audit WHERE ($1::text IS NULL OR workspace = $1) AND ($2::text IS NULL OR source_system = $2)"
        " AND ($3::text IS NULL OR external_id = $3) AND ($4::timestamptz IS NULL OR at >= $4)"
        " AND ($5::timestamptz IS NULL OR at < $5) AND ($6::bigint IS NULL OR id < $6)"
        " ORDER BY id DESC LIMIT $7",
        workspace,
        source_system,
        external_id,
        since,
        until,
        before_id,
        limit,
    )
    return [dict(r) for r in rows]


async def purges(
    conn: asyncpg.Connection,
    *,
    workspace: str | None,
    document: uuid.UUID | None,
    since: datetime | None,
    until: datetime | None,
    before_id: int | None,
    limit: int,
) -> list[dict[str, Any]]:
    rows = await conn.fetch(
        "SELECT id, run_id, at, actor, workspace, policy::text AS policy, reason, documents, chunks, versions,"
        " evidence_links, facts_retracted, blobs, document_ids FROM retention_audit"
        " WHERE ($1::text IS NULL OR workspace = $1) AND ($2::uuid IS NULL OR document_ids @> ARRAY[$2::uuid])"
        " AND ($3::timestamptz IS NULL OR at >= $3) AND ($4::timestamptz IS NULL OR at < $4)"
        " AND ($5::bigint IS NULL OR id < $5) ORDER BY id DESC LIMIT $6",
        workspace,
        document,
        since,
        until,
        before_id,
        limit,
    )
    return [dict(r) | {"policy": json.loads(r["policy"])} for r in rows]


async def record_ingress(conn: asyncpg.Connection, rows: list[tuple[Any, ...]]) -> None:
    """rows: (caller, envelope_id, workspace, source_system, external_id, op, topic, partition, offset)."""
    if rows:
        await conn.executemany(
            "INSERT INTO ingress_audit (caller, envelope_id, workspace, source_system, external_id, op, topic,"
            ' partition, "offset") VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)',
            rows,
        )
