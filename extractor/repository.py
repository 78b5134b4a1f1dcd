"""SQL of the extractor stage (asyncpg): documents, chunk spans, identity keys, bookkeeping."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import date
from typing import Any

import asyncpg

STAGE = "extract"


async def load_documents(conn: asyncpg.Connection, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, asyncpg.Record]:
    rows = await conn.fetch(
        "SELECT id, workspace, source_system, external_id, kind, title, event_time, deleted_at,"
        " current_version,"
        " author_person_id, blob_key, structured_fields::text AS structured_fields"
        " FROM documents WHERE id = ANY($1::uuid[])",
        list(ids),
    )
    return {r["id"]: r for r in rows}


async def child_spans(
    conn: asyncpg.Connection, ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[tuple[int, int, uuid.UUID]]]:
    rows = await conn.fetch(
        "SELECT document_id, char_start, char_end, id FROM chunks"
        " WHERE document_id = ANY($1::uuid[]) AND NOT is_parent",
        list(ids),
    )
    out: dict[uuid.UUID, list[tuple[int, int, uuid.UUID]]] = {}
    for r in rows:
        out.setdefault(r["document_id"], []).append((r["char_start"], r["char_end"], r["id"]))
    return out


async def document_text(conn: asyncpg.Connection, doc_id: uuid.UUID) -> str:
    """The document text rebuilt from its parent chunks (fallback when no envelope is archived)."""
    rows = await conn.fetch(
        "SELECT char_start, text FROM chunks WHERE document_id = $1 AND is_parent ORDER BY char_start", doc_id
    )
    out = ""
    for r in rows:
        start = r["char_start"]
        if start > len(out):
            out += " " * (start - len(out))
        out = out[:start] + r["text"]
    return out


async def spent_today(conn: asyncpg.Connection, workspace: str, purpose: str) -> int:
    value = await conn.fetchval(
        "SELECT COALESCE(sum(tokens), 0) FROM spend WHERE day = current_date AND workspace = $1 AND purpose = $2",
        workspace,
        purpose,
    )
    return int(value)


async def record_spend(conn: asyncpg.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """rows: (day, workspace, provider, model, purpose, calls, items, tokens)."""
    if rows:
        await conn.executemany(
            "INSERT INTO spend (day, workspace, provider, model, purpose, calls, items, tokens)"
            " VALUES ($1,$2,$3,$4,$5,$6,$7,$8) ON CONFLICT (day, workspace, provider, model, purpose) DO"
            " UPDATE"
            " SET calls = spend.calls + EXCLUDED.calls, items = spend.items + EXCLUDED.items,"
            " tokens = spend.tokens + EXCLUDED.tokens",
            rows,
        )


def today() -> date:
    return date.today()
