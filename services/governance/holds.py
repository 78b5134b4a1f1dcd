"""Legal holds: a held document is never purged (retention skips it, its blobs stay); it stays
tombstoned and invisible to search, and the hold's owner can list it and read its archived envelope."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg

HOLD_COLUMNS = (
    "id, workspace, source_system, document_ids, person_id, from_time, to_time, reason, created_by, created_at,"
    " released_at, released_by"
)


async def create_hold(conn: asyncpg.Connection, spec: dict[str, Any], actor: str) -> dict[str, Any]:
    _changed()
    row = await conn.fetchrow(
        "INSERT INTO legal_holds (id, workspace, source_system, document_ids, person_id, from_time, to_time,"
        f" reason, created_by) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9) RETURNING {HOLD_COLUMNS}",
        uuid.uuid4(),
        spec["workspace"],
        spec.get("source_system"),
        spec.get("document_ids"),
        spec.get("person_id"),
        spec.get("from_time"),
        spec.get("to_time"),
        spec["reason"],
        actor,
    )
    assert row is not None
    return dict(row)


async def list_holds(
    conn: asyncpg.Connection, *, workspace: str | None, include_released: bool
) -> list[dict[str, Any]]:
    rows = await conn.fetch(
        f"SELECT {HOLD_COLUMNS} FROM legal_holds WHERE ($1::text IS NULL OR workspace = $1)"
        " AND ($2 OR released_at IS NULL) ORDER BY created_at, id",
        workspace,
        include_released,
    )
    return [dict(r) for r in rows]


async def get_hold(conn: asyncpg.Connection, hold_id: uuid.UUID) -> dict[str, Any] | None:
    row = await conn.fetchrow(f"SELECT {HOLD_COLUMNS} FROM legal_holds WHERE id = $1", hold_id)
    return dict(row) if row else None


async def release_hold(conn: asyncpg.Connection, hold_id: uuid.UUID, actor: str) -> dict[str, Any] | None:
    """Release a hold (idempotent: releasing twice keeps the first release)."""
    _changed()
    row = await conn.fetchrow(
        "UPDATE legal_holds SET released_at = COALESCE(released_at, now()),"
        f" released_by = COALESCE(released_by, $2) WHERE id = $1 RETURNING {HOLD_COLUMNS}",
        hold_id,
        actor,
    )
    return dict(row) if row else None


def _changed() -> None:
    from services.governance.retention_policies import forget_due_summary  # which imports this module

    forget_due_summary()


HELD_BY = """
    h.workspace = d.workspace
    AND (h.source_system IS NULL OR h.source_system = d.source_system)
    AND (h.document_ids IS NULL OR d.id = ANY (h.document_ids))
    AND (h.from_time IS NULL OR d.event_time >= h.from_time)
    AND (h.to_time IS NULL OR d.event_time < h.to_time)
    AND (h.person_id IS NULL OR d.author_person_id = h.person_id
         OR EXISTS (SELECT 1 FROM participants p WHERE p.document_id = d.id AND p.person_id = h.person_id))
"""


async def held_documents(
    conn: asyncpg.Connection, hold_id: uuid.UUID, *, limit: int, after: uuid.UUID | None
) -> list[dict[str, Any]]:
    """Documents a hold covers (tombstoned ones included), ordered by id for keyset pagination."""
    rows = await conn.fetch(
        "SELECT d.id, d.workspace, d.source_system, d.external_id, d.kind, d.title, d.event_time, d.deleted_at,"
        f" d.blob_key FROM legal_holds h JOIN documents d ON {HELD_BY}"
        " WHERE h.id = $1 AND ($2::uuid IS NULL OR d.id > $2) ORDER BY d.id LIMIT $3",
        hold_id,
        after,
        limit,
    )
    return [dict(r) for r in rows]


def archived_line(data: bytes, blob_key: str) -> str | None:
    """The envelope at ``<object key>#<line>`` inside a batch object (None if it was purged)."""
    _, _, line = blob_key.partition("#")
    lines = data.split(b"\n")
    index = int(line or 0)
    if index >= len(lines) or not lines[index].strip():
        return None
    text = lines[index].decode("utf-8", "replace")
    json.loads(text)  # an archived line is one JSON envelope; anything else is corruption, not data
    return text
