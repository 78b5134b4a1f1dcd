"""The parts of a Worldbuilder profile (pure field builders and the reads behind them): facts and project links as
profile fields, merged lists, key collaborators, recent activity, aliases and single-valued slots bound by
their evidence. Assembled, cached and re-grounded by :mod:`retriever.graph.worldbuilder`."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import asyncpg

from retriever.graph.reads import query_facts
from schemas.graph import EntityBrief, Fact, ProjectLink
from schemas.worldbuilder import ProfileField
from services.decay import HALF_LIFE_DAYS
from services.people import visible_aliases
from services.viewer import Principals

FACT_LIMIT = 300
LIST_LIMIT = 10
ACTIVITY_LIMIT = 5


async def _person_ids(conn: asyncpg.Connection, entity: uuid.UUID) -> list[uuid.UUID]:
    rows = await conn.fetch("SELECT id FROM people WHERE id = $1 OR merged_into = $1", entity)
    return [r["id"] for r in rows] or [entity]


def _link_field(link: ProjectLink) -> ProfileField:
    """A person↔project link (either end) as a profile field with its evidence."""
    return ProfileField(
        value=link.entity.name,
        entity=link.entity,
        evidence=sorted(link.evidence, key=str),
        as_of=link.last_seen,
        source="project_link",
    )


def _fact_field(f: Fact, *, other_end: bool = True) -> ProfileField:
    """A fact as a field: the entity at the other end (or the literal value)."""
    if f.object is not None:
        ent = f.object if (f.direction or "outgoing") == "outgoing" else f.subject
        if not other_end:
            ent = f.subject
        value, brief = ent.name, ent
    else:
        value, brief = f.value or "", None
    return ProfileField(
        value=value,
        entity=brief,
        evidence=sorted({e.document_id for e in f.evidence}, key=str),
        as_of=f.valid_from,
        source="fact",
        predicate=f.predicate,
    )


def _pick(facts: Sequence[Fact], predicate: str, direction: str, types: Iterable[str] | None = None) -> list[Fact]:
    wanted = set(types) if types else None
    out = []
    for f in facts:
        if f.predicate != predicate or (f.direction or "outgoing") != direction:
            continue
        other = f.object if direction == "outgoing" else f.subject
        if wanted is not None and (other is None or other.type not in wanted):
            continue
        out.append(f)
    return out


def _merge(fields: Iterable[ProfileField], limit: int = LIST_LIMIT) -> list[ProfileField]:
    """One item per entity (or value): evidence united, latest ``as_of``, order of first appearance."""
    merged: dict[str, ProfileField] = {}
    for f in fields:
        key = str(f.entity.id) if f.entity else "v:" + f.value.casefold()
        old = merged.get(key)
        if old is None:
            merged[key] = f
            continue
        as_of = max((t for t in (old.as_of, f.as_of) if t is not None), default=None)
        merged[key] = old.model_copy(
            update={"evidence": sorted(set(old.evidence) | set(f.evidence), key=str), "as_of": as_of}
        )
    return list(merged.values())[:limit]


async def _collaborators(
    conn: asyncpg.Connection, workspace: str, viewer: Principals, person: uuid.UUID
) -> list[ProfileField]:
    """Top person collaborators with the visible documents behind each edge."""
    rows = await conn.fetch(
        "WITH c AS (SELECT CASE WHEN k.a_id = $2 THEN k.b_id ELSE k.a_id END AS other, k.weight, k.event_time,"
        " k.document_id FROM collab_contributions k JOIN documents d ON d.id = k.document_id"
        " WHERE k.workspace = $1 AND (k.a_id = $2 OR k.b_id = $2) AND k.a_kind = 'person' AND k.b_kind = 'person'"
        " AND d.deleted_at IS NULL AND d.principals && $3::text[])"
        " SELECT c.other, e.name, max(c.event_time) AS last_seen,"
        " sum(c.weight * power(0.5, extract(epoch FROM now() - c.event_time) / 86400.0 / $4)) AS w,"
        " (array_agg(DISTINCT c.document_id))[1:20] AS docs"
        " FROM c JOIN entities e ON e.id = c.other GROUP BY c.other, e.name ORDER BY w DESC, c.other LIMIT $5",
        workspace,
        person,
        list(viewer),
        HALF_LIFE_DAYS,
        LIST_LIMIT,
    )
    return [
        ProfileField(
            value=r["name"],
            entity=EntityBrief(type="person", id=r["other"], name=r["name"]),
            evidence=sorted(r["docs"], key=str),
            as_of=r["last_seen"],
            source="collaboration",
        )
        for r in rows
    ]


async def _activity(
    conn: asyncpg.Connection, workspace: str, viewer: Principals, entity: EntityBrief
) -> list[ProfileField]:
    """Latest visible documents the person took part in (or that name the entity)."""
    if entity.type == "person":
        people = await _person_ids(conn, entity.id)
        docs = "SELECT document_id FROM participants WHERE person_id = ANY($2::uuid[])"
        arg: Any = people
    else:
        docs = "SELECT document_id FROM entity_evidence WHERE entity_id = $2"
        arg = entity.id
    rows = await conn.fetch(
        "SELECT d.id, d.kind, d.title, d.source_system, d.external_id, d.event_time,"
        " (SELECT left(c.text, 160) FROM chunks c WHERE c.document_id = d.id AND NOT c.is_parent AND NOT c.deleted"
        "  ORDER BY c.ordinal LIMIT 1) AS snippet"
        f" FROM documents d WHERE d.workspace = $1 AND d.id IN ({docs}) AND d.deleted_at IS NULL"
        " AND d.principals && $3::text[] ORDER BY d.event_time DESC, d.id LIMIT $4",
        workspace,
        arg,
        list(viewer),
        ACTIVITY_LIMIT,
    )
    return [
        ProfileField(
            value=f"{r['kind']}: {r['title'] or r['snippet'] or r['external_id']}",
            evidence=[r["id"]],
            as_of=r["event_time"],
            source="activity",
        )
        for r in rows
    ]


async def _aliases(
    conn: asyncpg.Connection, entity: EntityBrief, viewer: Principals
) -> tuple[list[ProfileField], str | None]:
    """Names and, for a person, the identity aliases THIS viewer may see (all-visible over their sources)."""
    names = [
        r["alias"]
        for r in await conn.fetch("SELECT alias FROM entity_aliases WHERE entity_id = $1 ORDER BY alias", entity.id)
    ]
    platform = None
    if entity.type == "person":
        keys = await visible_aliases(conn, viewer, await _person_ids(conn, entity.id))
        platform = next((v for ns, v in keys if ns == "platform_user"), None)
        names += [f"{ns}:{v}" for ns, v in keys if ns not in ("name", "platform_user")]
    own = entity.name.casefold()
    out = [ProfileField(value=a, source="alias") for a in dict.fromkeys(names) if a.casefold() != own]
    return out, platform


async def _bound_slot(
    conn: asyncpg.Connection,
    workspace: str,
    viewer: Principals,
    entity: EntityBrief,
    facts: Sequence[Fact],
    predicate: str,
    types: Sequence[str] | None,
) -> ProfileField | None:
    """A host-bound slot under the seed's conflict rule: Org Memory's current value wins until the host
    rejects it (a rejected taxonomy proposal), then the host's latest ground truth (structured value)."""
    rejected = {
        r["proposed_norm"]
        for r in await conn.fetch(
            "SELECT proposed_norm FROM taxonomy_proposals WHERE workspace = $1 AND subject_id = $2"
            " AND predicate = $3 AND status = 'rejected'",
            workspace,
            entity.id,
            predicate,
        )
    }
    candidates = [_fact_field(f) for f in _pick(facts, predicate, "outgoing", types)]
    kept = [c for c in candidates if " ".join(c.value.casefold().split()) not in rejected]
    if kept or not candidates:
        return kept[0] if kept else None
    host_at = await conn.fetchval(
        "SELECT max(valid_from) FROM facts WHERE workspace = $1 AND subject_id = $2 AND predicate = $3"
        " AND source = 'structured' AND invalidated_at IS NULL AND status <> 'retracted'",
        workspace,
        entity.id,
        predicate,
    )
    if host_at is None:
        return None
    then = await query_facts(
        conn,
        workspace=workspace,
        viewer=viewer,
        subjects=[(entity.type, entity.id)],
        as_of=host_at,
        limit=FACT_LIMIT,
        direction="outgoing",
    )
    host = [_fact_field(f) for f in _pick(then, predicate, "outgoing", types) if f.valid_from == host_at]
    return host[0] if host else None
