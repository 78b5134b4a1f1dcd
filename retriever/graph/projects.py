"""Person↔project collaboration edges, aggregated at read time under the viewer's ACL.

A person collaborates on a project (or product) when they authored (weight 1.0) or took part in (0.5) a
document that names it (``entity_evidence``, written by the conflicts stage). Contributions decay with the
collaboration half-life. Aggregating at read time keeps the edge consistent with ACL changes, tombstones
and the order in which the collaboration and graph stages see a document: only documents the viewer can
see contribute, and the project itself must be visible (all-visible rule).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from retriever.graph.temporal import Params, entity_acl_sql
from schemas.graph import EntityBrief, ProjectLink
from services.decay import HALF_LIFE_DAYS
from services.viewer import Principals

PROJECT_TYPES = ("project", "product")
AUTHOR_WEIGHT = 1.0
PARTICIPANT_WEIGHT = 0.5
EVIDENCE_PER_EDGE = 10


def _contributions(p: Params, ws: str, vw: str) -> str:
    """(person, document, role, weight, event_time) of visible documents, one row per person and document
    (author wins over participant), merged people followed. Ingest records authors as role ``author``."""
    return (
        "SELECT DISTINCT ON (person, document_id) * FROM ("
        "SELECT COALESCE(pp.merged_into, pp.id) AS person, d.id AS document_id,"
        " CASE WHEN x.role = 'author' THEN 'author' ELSE 'participant' END AS role,"
        f" CASE WHEN x.role = 'author' THEN {AUTHOR_WEIGHT} ELSE {PARTICIPANT_WEIGHT} END::float8 AS w,"
        " d.event_time FROM participants x JOIN documents d ON d.id = x.document_id"
        " JOIN people pp ON pp.id = x.person_id"
        f" WHERE d.workspace = {ws} AND d.deleted_at IS NULL AND d.principals && {vw}::text[]"
        ") k ORDER BY person, document_id, w DESC"
    )


def _aggregate(other: str, group_filter: str, p: Params, vw: str) -> str:
    hl = p.add(HALF_LIFE_DAYS)
    return (
        f" SELECT {other} AS other, e.type, e.name, array_agg(DISTINCT c.role ORDER BY c.role) AS roles,"
        " count(DISTINCT c.document_id) AS n, max(c.event_time) AS last_seen,"
        f" sum(c.w * power(0.5, extract(epoch FROM now() - c.event_time) / 86400.0 / {hl})) AS weight,"
        " (array_agg(c.document_id ORDER BY c.event_time DESC, c.document_id))"
        f"[1:{EVIDENCE_PER_EDGE}] AS evidence"
        f" FROM c JOIN entity_evidence ee ON ee.document_id = c.document_id JOIN entities e ON e.id = {other}"
        f" WHERE {group_filter} AND e.merged_into IS NULL AND {entity_acl_sql(vw)}"
        " GROUP BY 1, 2, 3 ORDER BY weight DESC, other LIMIT "
    )


def _links(rows: Sequence[asyncpg.Record]) -> list[ProjectLink]:
    out: list[ProjectLink] = []
    for r in rows:
        evidence = list(dict.fromkeys(r["evidence"]))
        out.append(
            ProjectLink(
                entity=EntityBrief(type=r["type"], id=r["other"], name=r["name"]),
                roles=list(r["roles"]),
                count=r["n"],
                last_seen=r["last_seen"],
                weight=float(r["weight"]),
                evidence=evidence,
            )
        )
    return out


async def person_projects(
    conn: asyncpg.Connection, *, workspace: str, viewer: Principals, person: uuid.UUID, limit: int = 10
) -> list[ProjectLink]:
    """The projects/products a person works on, strongest first."""
    if not viewer:
        return []
    p = Params()
    ws, vw, pid, types = p.add(workspace), p.add(list(viewer)), p.add(person), p.add(list(PROJECT_TYPES))
    sql = (
        f"WITH c AS (SELECT * FROM ({_contributions(p, ws, vw)}) k WHERE k.person = {pid})"
        + _aggregate("ee.entity_id", f"e.type = ANY({types}::text[])", p, vw)
        + p.add(limit)
    )
    return _links(await conn.fetch(sql, *p.values))


async def project_people(
    conn: asyncpg.Connection, *, workspace: str, viewer: Principals, entity: uuid.UUID, limit: int = 20
) -> list[ProjectLink]:
    """The people who work on a project/product (authors and participants of documents naming it)."""
    if not viewer:
        return []
    p = Params()
    ws, vw, eid = p.add(workspace), p.add(list(viewer)), p.add(entity)
    sql = (
        f"WITH c AS (SELECT k.* FROM ({_contributions(p, ws, vw)}) k JOIN entity_evidence x"
        f" ON x.document_id = k.document_id AND x.entity_id = {eid})"
        + _aggregate("c.person", f"ee.entity_id = {eid} AND e.type = 'person'", p, vw)
        + p.add(limit)
    )
    return _links(await conn.fetch(sql, *p.values))
