"""Permission history: who could see a document at a time, and what a viewer could have retrieved then.

ACL states come from ``acl_history`` (kept by a trigger on ``documents``: every applied ACL change,
tombstone and revival with the time it took effect; a state holds until the next one). A viewer's
principals at a time are their user principal plus their groups, expanded through the org hierarchy.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg

MAX_HITS = 200

STATE_AT = """
SELECT DISTINCT ON (h.document_id) h.document_id, h.principals, h.deleted, h.valid_from
FROM acl_history h
WHERE h.valid_from <= $1
ORDER BY h.document_id, h.valid_from DESC, h.recorded_at DESC
"""


def intervals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ACL history rows (valid_from ascending) as closed-open validity intervals."""
    out: list[dict[str, Any]] = []
    for i, r in enumerate(rows):
        nxt = rows[i + 1]["valid_from"] if i + 1 < len(rows) else None
        out.append(
            {
                "valid_from": r["valid_from"],
                "valid_to": nxt,
                "principals": [] if r["deleted"] else sorted(r["principals"]),
                "deleted": bool(r["deleted"]),
            }
        )
    return out


def state_at(history: list[dict[str, Any]], as_of: datetime) -> dict[str, Any] | None:
    """The interval containing ``as_of``, or None before the document existed."""
    for state in history:
        if state["valid_from"] <= as_of and (state["valid_to"] is None or as_of < state["valid_to"]):
            return state
    return None


async def document_access(conn: asyncpg.Connection, document_id: uuid.UUID, as_of: datetime) -> dict[str, Any] | None:
    known = await conn.fetchval("SELECT 1 FROM documents WHERE id = $1", document_id)
    if known is None:
        return None
    rows = await conn.fetch(
        "SELECT valid_from, principals, deleted FROM acl_history WHERE document_id = $1"
        " ORDER BY valid_from, recorded_at",
        document_id,
    )
    history = intervals([dict(r) for r in rows])
    state = state_at(history, as_of)
    return {
        "document_id": document_id,
        "as_of": as_of,
        "exists": state is not None,
        "deleted": bool(state and state["deleted"]),
        "principals": state["principals"] if state else [],
        "history": history,
    }


async def viewer_documents(
    conn: asyncpg.Connection,
    *,
    principals: list[str],
    as_of: datetime,
    query: str | None,
    workspace: str | None,
    limit: int = MAX_HITS,
) -> list[dict[str, Any]]:
    """Documents the principals held at ``as_of`` (existing and not deleted then), optionally only
    those whose text matches ``query`` (full text, websearch syntax)."""
    rows = await conn.fetch(
        f"WITH st AS ({STATE_AT})"
        " SELECT d.id AS document_id, d.external_id, d.source_system, d.kind, d.title, d.event_time,"
        " ARRAY(SELECT unnest(st.principals) INTERSECT SELECT unnest($2::text[])) AS matched_principals"
        " FROM st JOIN documents d ON d.id = st.document_id"
        " WHERE NOT st.deleted AND st.principals && $2::text[]"
        " AND ($4::text IS NULL OR d.workspace = $4)"
        " AND ($3::text IS NULL OR EXISTS (SELECT 1 FROM chunks c WHERE c.document_id = d.id AND NOT c.is_parent"
        "      AND c.tsv @@ websearch_to_tsquery('english', $3)))"
        " ORDER BY d.event_time DESC, d.id LIMIT $5",
        as_of,
        principals,
        query,
        workspace,
        limit,
    )
    return [dict(r) | {"matched_principals": sorted(r["matched_principals"])} for r in rows]


async def viewer_groups(conn: asyncpg.Connection, member: str, as_of: datetime) -> tuple[list[str], str]:
    """The groups ``member`` belonged to at ``as_of`` from the org directory's membership history
    (``directory_groups_at``; groups nested in groups followed), and where that answer came from.
    Without a directory in this schema the answer is empty and says so."""
    has_directory = await conn.fetchval("SELECT to_regproc('directory_groups_at') IS NOT NULL")
    if not has_directory:
        return [], "none (no org directory in this deployment)"
    seen: set[str] = set()
    frontier = [member]
    for _ in range(MAX_NESTING):
        if not frontier:
            break
        rows = await conn.fetch(
            "SELECT DISTINCT g.group_id FROM unnest($1::text[]) m, LATERAL directory_groups_at(m, $2) g",
            frontier,
            as_of,
        )
        frontier = [r["group_id"] for r in rows if r["group_id"] not in seen]
        seen.update(frontier)
    return sorted(seen), "directory"


MAX_NESTING = 8
