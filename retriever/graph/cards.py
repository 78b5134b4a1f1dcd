"""Person and entity cards: the visible facts about one entity, both directions, plus collaborators.

A card exists for a viewer only when the entity itself is visible (``temporal.entity_acl_sql``); a person's
identity aliases (email, platform user id, handles) only under the all-visible rule over their sources.
Collaborators are aggregated from the collaboration contributions of documents the viewer can see,
with the same exponential decay as the collaboration stage (``services.decay``), so a private thread never shows up.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg

from retriever.graph.projects import PROJECT_TYPES, person_projects, project_people
from retriever.graph.reads import current_ids, query_facts
from retriever.graph.temporal import Params, entity_acl_sql
from schemas.graph import Collaborator, EntityBrief, EntityCard, PersonCard
from services.decay import HALF_LIFE_DAYS, decay_sql
from services.people import visible_aliases
from services.viewer import Principals

FACT_LIMIT = 100


async def _visible_entity(
    conn: asyncpg.Connection, workspace: str, viewer: Principals, entity_id: uuid.UUID
) -> asyncpg.Record | None:
    if not viewer:
        return None
    [cur] = await current_ids(conn, [entity_id])
    p = Params()
    ws, eid, vw = p.add(workspace), p.add(cur), p.add(list(viewer))
    row: asyncpg.Record | None = await conn.fetchrow(
        f"SELECT e.id, e.type, e.name FROM entities e WHERE e.workspace = {ws} AND e.id = {eid}"
        f" AND {entity_acl_sql(vw)}",
        *p.values,
    )
    return row


async def entity_card(
    conn: asyncpg.Connection,
    *,
    workspace: str,
    viewer: Principals,
    entity_id: uuid.UUID,
    as_of: datetime | None = None,
    believed_as_of: datetime | None = None,
    as_of_grain: str | None = None,
) -> EntityCard | None:
    row = await _visible_entity(conn, workspace, viewer, entity_id)
    if row is None:
        return None
    subj = [(row["type"], row["id"])]
    kw: dict[str, Any] = {
        "as_of": as_of,
        "believed_as_of": believed_as_of,
        "as_of_grain": as_of_grain,
        "limit": FACT_LIMIT,
    }
    aliases = [
        r["alias"]
        for r in await conn.fetch("SELECT alias FROM entity_aliases WHERE entity_id = $1 ORDER BY alias", row["id"])
    ]
    return EntityCard(
        id=row["id"],
        type=row["type"],
        name=row["name"],
        aliases=aliases,
        facts=await query_facts(conn, workspace=workspace, viewer=viewer, subjects=subj, direction="outgoing", **kw),
        incoming=await query_facts(conn, workspace=workspace, viewer=viewer, subjects=subj, direction="incoming", **kw),
        contributors=await project_people(conn, workspace=workspace, viewer=viewer, entity=row["id"])
        if row["type"] in PROJECT_TYPES
        else [],
    )


async def collaborators(
    conn: asyncpg.Connection, *, workspace: str, viewer: Principals, person: uuid.UUID, limit: int = 10
) -> list[Collaborator]:
    """Top collaborators by decayed weight over contributions of documents visible to the viewer."""
    if not viewer:
        return []
    rows = await conn.fetch(
        "WITH c AS (SELECT CASE WHEN k.a_id = $2 THEN k.b_id ELSE k.a_id END AS other, k.weight, k.event_time"
        " FROM collab_contributions k JOIN documents d ON d.id = k.document_id"
        " WHERE k.workspace = $1 AND (k.a_id = $2 OR k.b_id = $2) AND k.a_kind = 'person' AND k.b_kind ="
        " 'person'"
        " AND d.deleted_at IS NULL AND d.principals && $3::text[])"
        " SELECT c.other, e.name, count(*) AS n, max(c.event_time) AS last_seen,"
        f" sum({decay_sql('c.weight', 'now()', 'c.event_time', '$4')}) AS w"
        " FROM c JOIN entities e ON e.id = c.other GROUP BY c.other, e.name ORDER BY w DESC, c.other LIMIT"
        " $5",
        workspace,
        person,
        list(viewer),
        HALF_LIFE_DAYS,
        limit,
    )
    return [
        Collaborator(
            person=EntityBrief(type="person", id=r["other"], name=r["name"]),
            count=r["n"],
            last_seen=r["last_seen"],
            weight=float(r["w"]),
        )
        for r in rows
    ]


async def person_card(
    conn: asyncpg.Connection,
    *,
    workspace: str,
    viewer: Principals,
    person_id: uuid.UUID,
    as_of: datetime | None = None,
    believed_as_of: datetime | None = None,
    as_of_grain: str | None = None,
) -> PersonCard | None:
    card = await entity_card(
        conn,
        workspace=workspace,
        viewer=viewer,
        entity_id=person_id,
        as_of=as_of,
        believed_as_of=believed_as_of,
        as_of_grain=as_of_grain,
    )
    if card is None or card.type != "person":
        return None
    person = await conn.fetchrow("SELECT display_name, primary_email FROM people WHERE id = $1", card.id)
    keys = await visible_aliases(conn, viewer, [card.id])
    platform = next((v for ns, v in keys if ns == "platform_user"), None)
    email = person["primary_email"] if person else None
    if email is not None and ("email", email.lower()) not in keys:  # learnt from a document this viewer lacks
        email = next((v for ns, v in keys if ns == "email"), None)
    return PersonCard(
        id=card.id,
        name=card.name,
        email=email,
        platform_user_id=platform,
        aliases=[f"{ns}:{v}" for ns, v in keys if ns != "name"],
        facts=card.facts,
        incoming=card.incoming,
        collaborators=await collaborators(conn, workspace=workspace, viewer=viewer, person=card.id),
        projects=await person_projects(conn, workspace=workspace, viewer=viewer, person=card.id),
    )
