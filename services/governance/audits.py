"""Audit reads, newest first, keyset-paginated (the cursor is the last row's id)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

MAX_PAGE = 500


@dataclass(frozen=True)
class Window:
    """The part every audit read shares: a time range, a keyset cursor (rows older than ``before_id``) and
    a page size."""

    since: datetime | None = None
    until: datetime | None = None
    before_id: int | None = None
    limit: int = 100


def next_cursor(rows: list[dict[str, Any]], limit: int) -> str | None:
    return str(rows[-1]["id"]) if len(rows) == limit and rows else None


async def _page(
    conn: asyncpg.Connection, select: str, filters: list[tuple[str, Any]], window: Window
) -> list[asyncpg.Record]:
    """``select`` narrowed by each optional filter (a condition on ``{p}``, skipped when its value is
    ``None``) and by the window, newest first. Every condition is a bound parameter: one statement shape."""
    shared = [
        ("({p}::timestamptz IS NULL OR at >= {p})", window.since),
        ("({p}::timestamptz IS NULL OR at < {p})", window.until),
        ("({p}::bigint IS NULL OR id < {p})", window.before_id),
    ]
    conds = filters + shared
    where = " AND ".join(sql.format(p=f"${i}") for i, (sql, _) in enumerate(conds, start=1))
    sql = f"{select} WHERE {where} ORDER BY id DESC LIMIT ${len(conds) + 1}"
    return list(await conn.fetch(sql, *(value for _, value in conds), window.limit))


async def retrievals(
    conn: asyncpg.Connection,
    window: Window,
    *,
    viewer: str | None = None,
    document: uuid.UUID | None = None,
    workspace: str | None = None,
) -> list[dict[str, Any]]:
    """Who retrieved what; ``document`` answers "who saw document D, and when"."""
    select = (
        "SELECT id, at, workspace, viewer, tool, query_hash, returned_ids, returned_documents, latency_ms"
        " FROM retrieval_audit"
    )
    filters = [
        ("({p}::text IS NULL OR viewer = {p})", viewer),
        ("({p}::uuid IS NULL OR returned_documents @> ARRAY[{p}::uuid])", document),
        ("({p}::text IS NULL OR workspace = {p})", workspace),
    ]
    return [dict(r) for r in await _page(conn, select, filters, window)]


async def ingress(
    conn: asyncpg.Connection,
    window: Window,
    *,
    workspace: str | None = None,
    source_system: str | None = None,
    external_id: str | None = None,
) -> list[dict[str, Any]]:
    select = (
        'SELECT id, at, caller, envelope_id, workspace, source_system, external_id, op, topic, partition, "offset"'
        " FROM ingress_audit"
    )
    filters = [
        ("({p}::text IS NULL OR workspace = {p})", workspace),
        ("({p}::text IS NULL OR source_system = {p})", source_system),
        ("({p}::text IS NULL OR external_id = {p})", external_id),
    ]
    return [dict(r) for r in await _page(conn, select, filters, window)]


async def purges(
    conn: asyncpg.Connection, window: Window, *, workspace: str | None = None, document: uuid.UUID | None = None
) -> list[dict[str, Any]]:
    """Every purge batch: who ran it, under which policy, what it removed."""
    select = (
        "SELECT id, run_id, at, actor, workspace, policy::text AS policy, reason, documents, chunks, versions,"
        " evidence_links, facts_retracted, blobs, document_ids FROM retention_audit"
    )
    filters = [
        ("({p}::text IS NULL OR workspace = {p})", workspace),
        ("({p}::uuid IS NULL OR document_ids @> ARRAY[{p}::uuid])", document),
    ]
    return [dict(r) | {"policy": json.loads(r["policy"])} for r in await _page(conn, select, filters, window)]


async def record_ingress(conn: asyncpg.Connection, rows: list[tuple[Any, ...]]) -> None:
    """rows: (caller, envelope_id, workspace, source_system, external_id, op, topic, partition, offset)."""
    if rows:
        await conn.executemany(
            "INSERT INTO ingress_audit (caller, envelope_id, workspace, source_system, external_id, op, topic,"
            ' partition, "offset") VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)',
            rows,
        )
