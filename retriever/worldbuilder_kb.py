"""``worldbuilder_kb``: the product's hybrid search in the Worldbuilder response shape — results grouped
per document with its people and their roles.

``about`` and ``author`` name a person (id, email or name, resolved under the viewer's ACL) and are
distinct: ``about`` keeps documents the person PARTICIPATES in (any recorded role, authorship included),
``author`` keeps documents they AUTHORED. A name that resolves to no visible person matches nothing (and
says so in diagnostics) — never the unfiltered search.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import asyncpg

from retriever.compose import TimeAxes
from retriever.graph.reads import resolve_entities
from retriever.passages import PassageSearch
from retriever.rows import resolve_author
from retriever.service import RetrieverService
from schemas.graph import EntityBrief
from schemas.worldbuilder import KbDocument, KbPassage, KbPerson, WorldbuilderKbRequest, WorldbuilderKbResponse
from services.viewer import Principals, Viewer

PASSAGES_PER_DOCUMENT = 3


async def resolve_people(conn: asyncpg.Connection, workspace: str, viewer: Principals, value: str) -> list[EntityBrief]:
    """A person named by id, email or name, visible to the viewer (merges followed)."""
    ids: tuple[uuid.UUID, ...] = ()
    try:
        ids = (uuid.UUID(value),)
    except ValueError:
        if "@" in value:
            ids = await resolve_author(conn, workspace, value, viewer)
    if ids:
        rows = await conn.fetch(
            "SELECT DISTINCT COALESCE(p.merged_into, p.id) AS id FROM people p WHERE p.id = ANY($1::uuid[])",
            list(ids),
        )
        cur = [r["id"] for r in rows]
        named = await conn.fetch(
            "SELECT p.id, COALESCE(p.display_name, p.primary_email, p.id::text) AS name FROM people p"
            " WHERE p.id = ANY($1::uuid[]) AND EXISTS (SELECT 1 FROM participants x JOIN documents d"
            " ON d.id = x.document_id WHERE x.person_id = p.id AND d.deleted_at IS NULL"
            " AND d.principals && $2::text[])",
            cur,
            list(viewer),
        )
        return [EntityBrief(type="person", id=r["id"], name=r["name"]) for r in named]
    found = await resolve_entities(conn, workspace=workspace, viewer=viewer, name=value, types=["person"], limit=3)
    exact = [m for m in found if m.score >= 0.95] or found[:1]
    return [EntityBrief(type="person", id=m.id, name=m.name) for m in exact]


async def _with_merged(conn: asyncpg.Connection, people: Sequence[EntityBrief]) -> tuple[uuid.UUID, ...]:
    ids = [p.id for p in people]
    rows = await conn.fetch("SELECT id FROM people WHERE id = ANY($1::uuid[]) OR merged_into = ANY($1::uuid[])", ids)
    return tuple(sorted({r["id"] for r in rows} | set(ids), key=str))


async def worldbuilder_kb(svc: RetrieverService, req: WorldbuilderKbRequest, viewer: Viewer) -> WorldbuilderKbResponse:
    start = time.perf_counter()
    now = datetime.now(UTC)
    principals = viewer.expand(svc.hierarchy)
    resolved: dict[str, list[EntityBrief]] = {}
    notes: dict[str, str] = {}
    participant_ids: tuple[uuid.UUID, ...] | None = None
    author_ids: tuple[uuid.UUID, ...] | None = None
    async with svc.pool.acquire() as conn:
        for key, value in (("about", req.about), ("author", req.author)):
            if not value:
                continue
            people = await resolve_people(conn, req.workspace, principals, value) if principals else []
            resolved[key] = people
            ids = await _with_merged(conn, people) if people else ()
            if not people:
                notes[key] = "no visible person matched"
            if key == "about":
                participant_ids = ids
            else:
                author_ids = ids
    axes = TimeAxes(req.as_of, None, None, req.filters.date_from, req.filters.date_to, None, None, "host")
    found = await svc.passages.search(
        query=req.query,
        workspace=req.workspace,
        filters=req.filters,
        limit=min(50, req.limit * PASSAGES_PER_DOCUMENT),
        arms="full",
        viewer=principals,
        own=viewer.principals,
        axes=axes,
        now=now,
        author_ids=author_ids,
        participant_ids=participant_ids,
    )
    order, groups = _grouped(found, req.limit)
    doc_ids = [uuid.UUID(d) for d in order]
    async with svc.pool.acquire() as conn:
        people_of = await _people_of(conn, doc_ids)
    results = []
    for d in doc_ids:
        first = next(rh for rh in found.ranked if str(found.rows[rh.hit.chunk_id].document_id) == str(d))
        row = found.rows[first.hit.chunk_id]
        results.append(
            KbDocument(
                document_id=d,
                source_system=row.source_system,
                external_id=row.external_id,
                title=row.title,
                kind=row.kind,
                url=row.url,
                event_time=row.event_time,
                score=groups[str(d)][0].score,
                people=people_of.get(d, []),
                passages=groups[str(d)],
            )
        )
    svc.access.record(p.chunk_id for doc in results for p in doc.passages)
    diag = found.diagnostics | {"worldbuilder": notes, "documents": len(results)}
    diag.setdefault("timings_ms", {})["total"] = round((time.perf_counter() - start) * 1000, 2)
    return WorldbuilderKbResponse(results=results, resolved=resolved, diagnostics=diag)


def _grouped(found: PassageSearch, limit: int) -> tuple[list[str], dict[str, list[KbPassage]]]:
    """The first ``limit`` documents in rank order, each with its best ``PASSAGES_PER_DOCUMENT`` passages."""
    order: list[str] = []
    groups: dict[str, list[KbPassage]] = {}
    for rh in found.ranked:
        row = found.rows[rh.hit.chunk_id]
        doc = str(row.document_id)
        if doc not in groups:
            if len(order) >= limit:
                continue
            order.append(doc)
            groups[doc] = []
        if len(groups[doc]) < PASSAGES_PER_DOCUMENT:
            groups[doc].append(
                KbPassage(
                    chunk_id=row.chunk_id,
                    text=row.parent_text or row.text,
                    snippet=row.text,
                    score=found.scores[rh.hit.chunk_id],
                )
            )
    return order, groups


async def _people_of(conn: asyncpg.Connection, doc_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[KbPerson]]:
    """Each document's people (merged persons, authors first) with their roles."""
    people_rows = await conn.fetch(
        "SELECT x.document_id, COALESCE(p.merged_into, p.id) AS pid,"
        " COALESCE(m.display_name, p.display_name, m.primary_email, p.primary_email) AS name,"
        " array_agg(DISTINCT x.role ORDER BY x.role) AS roles"
        " FROM participants x JOIN people p ON p.id = x.person_id LEFT JOIN people m ON m.id = p.merged_into"
        " WHERE x.document_id = ANY($1::uuid[]) GROUP BY 1, 2, 3 ORDER BY 1, (bool_or(x.role = 'author')) DESC, 3",
        doc_ids,
    )
    people_of: dict[uuid.UUID, list[KbPerson]] = {}
    for r in people_rows:
        people_of.setdefault(r["document_id"], []).append(
            KbPerson(
                person=EntityBrief(type="person", id=r["pid"], name=r["name"] or str(r["pid"])), roles=list(r["roles"])
            )
        )
    return people_of
