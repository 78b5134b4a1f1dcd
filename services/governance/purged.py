"""The purged-document registry: what retention removed, so replaying the envelope log cannot bring it back."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg


async def remember(conn: asyncpg.Connection, ids: Sequence[uuid.UUID], run_id: uuid.UUID) -> None:
    """Record these documents (inside the purge transaction, before their rows go)."""
    await conn.execute(
        "INSERT INTO purged_documents (document_id, workspace, source_system, external_id, purged_through, run_id)"
        " SELECT id, workspace, source_system, external_id, GREATEST(event_time, COALESCE(deleted_at, event_time),"
        " COALESCE(acl_event_time, event_time)), $2 FROM documents WHERE id = ANY($1::uuid[])"
        " ON CONFLICT (document_id) DO UPDATE SET purged_through = GREATEST(purged_documents.purged_through,"
        " EXCLUDED.purged_through), purged_at = now(), run_id = EXCLUDED.run_id",
        list(ids),
        run_id,
    )


async def purged_through(conn: asyncpg.Connection, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, datetime]:
    if not ids:
        return {}
    rows = await conn.fetch(
        "SELECT document_id, purged_through FROM purged_documents WHERE document_id = ANY($1::uuid[])", list(ids)
    )
    return {r["document_id"]: r["purged_through"] for r in rows}


def is_purged(purged: dict[uuid.UUID, datetime], doc_id: uuid.UUID, event_time: datetime) -> bool:
    """Pure: an envelope of a purged document that is not newer than the purge horizon stays out."""
    horizon = purged.get(doc_id)
    return horizon is not None and event_time <= horizon
