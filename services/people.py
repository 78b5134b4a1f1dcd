"""Person lookups shared by the graph stages, and the viewer-scoped identity reads (an alias is shown or
resolved only under the all-visible rule over its source documents, ``services.sources``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

import asyncpg

from services.db.pairs import PAIR_IN, ids_by_pair
from services.sources import alias_visible_sql


async def resolve_keys(
    conn: asyncpg.Connection, workspace: str, keys: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], uuid.UUID]:
    """Identity keys -> current person id (following ``people.merged_into``)."""
    sql = (
        "SELECT a.namespace, a.value, COALESCE(p.merged_into, a.person_id) AS person_id"
        " FROM person_aliases a JOIN people p ON p.id = a.person_id"
        f" WHERE a.workspace = $1 AND (a.namespace, a.value) {PAIR_IN}"
    )
    return await ids_by_pair(conn, sql, workspace, keys)


async def visible_person_by_alias(
    conn: asyncpg.Connection, workspace: str, viewer: Sequence[str], namespace: str, value: str
) -> uuid.UUID | None:
    """The current person an identity alias resolves to, for a viewer who sees every live source of the
    alias (``services.sources``); None otherwise — the same answer as for an unknown key."""
    if not viewer:
        return None
    found: uuid.UUID | None = await conn.fetchval(
        "SELECT COALESCE(p.merged_into, p.id) FROM person_aliases a JOIN people p ON p.id = a.person_id"
        f" WHERE a.workspace = $1 AND a.namespace = $2 AND a.value = $3 AND {alias_visible_sql('$4')}",
        workspace,
        namespace,
        value,
        list(viewer),
    )
    return found


async def visible_aliases(
    conn: asyncpg.Connection, viewer: Sequence[str], person_ids: Sequence[uuid.UUID]
) -> list[tuple[str, str]]:
    """(namespace, value) of the people's identity aliases this viewer may see, sorted."""
    if not viewer or not person_ids:
        return []
    rows = await conn.fetch(
        "SELECT a.namespace, a.value FROM person_aliases a WHERE a.person_id = ANY($1::uuid[])"
        f" AND {alias_visible_sql('$2')} ORDER BY a.namespace, a.value",
        list(person_ids),
        list(viewer),
    )
    return [(r["namespace"], r["value"]) for r in rows]
