"""The distilled profile of the current user, deterministic (no model; the seed's LLM profile is not built):

- role: the current ``has_title`` facts about the viewer's person;
- interests: current ``works_on`` / ``member_of`` facts and the viewer's ``preference`` memories;
- durable facts: the viewer's ``fact`` and ``decision`` memories, then its other current facts;
- summary: one sentence over the items above, citing the union of their sources.

Memories are the viewer's own (``list_memories``: authored by it and still visible to it), minus those a
consolidation absorbed (they stopped ranking). Facts are read under the derived-data rule (every evidence
document visible: ``services.sources``), in SQL. The person is the one whose verified ``principal`` alias is the
viewer's principal. Who the profile is about comes from the authenticated viewer, never from an argument.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from schemas.memory import ListMemoriesRequest, Memory
from schemas.memory_profile import MemoryProfile, MemoryProfileRequest, ProfileItem
from services.ids import document_id
from services.memories import AGENT_SYSTEM, PRINCIPAL_NAMESPACE
from services.memory_verbs import list_memories
from services.runtime import Runtime
from services.sources import all_visible_sql, fact_sources
from services.viewer import Viewer

ROLE = ("has_title",)
INTERESTS = ("works_on", "member_of")
OTHER = ("works_at", "reports_to", "manages")
_FACTS = f"""
SELECT f.id, f.predicate, f.valid_from, coalesce(o.name, f.value) AS object,
       (SELECT array_agg(DISTINCT ev.document_id) FROM fact_evidence ev WHERE ev.fact_id = f.id) AS sources
  FROM person_aliases a
  JOIN people p ON p.id = a.person_id OR p.merged_into = a.person_id
  JOIN facts f ON f.subject_id = p.id
  LEFT JOIN entities o ON o.id = f.object_id
 WHERE a.workspace = $1 AND a.namespace = $3 AND a.value = $4
   AND f.valid_to IS NULL AND f.invalidated_at IS NULL AND f.predicate = ANY($5::text[])
   AND {all_visible_sql(fact_sources("f.id"), "$2")}
 ORDER BY f.valid_from DESC
"""


async def _facts(conn: asyncpg.Connection, ws: str, seen: Sequence[str], pid: str) -> list[asyncpg.Record]:
    return list(await conn.fetch(_FACTS, ws, list(seen), PRINCIPAL_NAMESPACE, pid, [*ROLE, *INTERESTS, *OTHER]))


def _fact_item(r: asyncpg.Record) -> ProfileItem:
    text = r["object"] if r["predicate"] == "has_title" else f"{r['predicate'].replace('_', ' ')} {r['object']}"
    return ProfileItem(
        text=text, origin="fact", detail=r["predicate"], as_of=r["valid_from"], source_document_ids=r["sources"]
    )


def _memory_item(m: Memory, ws: str) -> ProfileItem:
    return ProfileItem(
        text=m.text,
        origin="memory",
        detail=m.kind,
        as_of=m.event_time,
        source_document_ids=[document_id(f"{ws}/{AGENT_SYSTEM}/{m.memory_id}")],
        memory_ids=[m.memory_id],
    )


async def _memories(rt: Runtime, viewer: Viewer, ws: str) -> list[Memory]:
    """The viewer's memories that still rank (not absorbed by a consolidation), newest first."""
    mine = (await list_memories(rt, viewer, ListMemoriesRequest(limit=100, workspace=ws))).memories
    ids = [document_id(f"{ws}/{AGENT_SYSTEM}/{m.memory_id}") for m in mine]
    hidden = {
        r["document_id"]
        for r in await rt.pool.fetch(
            "SELECT DISTINCT document_id FROM memory_hidden"
            " WHERE document_id = ANY($1::uuid[]) AND hidden_from <= now()",
            ids,
        )
    }
    return [m for m, i in zip(mine, ids, strict=True) if i not in hidden]


def _summary(role: list[ProfileItem], interests: list[ProfileItem], facts: list[ProfileItem]) -> ProfileItem | None:
    items = [*role, *interests, *facts]
    if not items:
        return None
    parts = [role[0].text] if role else []
    topics = [i.text for i in interests if i.origin == "fact"][:3]
    if topics:
        parts.append(", ".join(topics))
    kinds: dict[str, int] = {}
    for i in items:
        if i.origin == "memory":
            kinds[i.detail] = kinds.get(i.detail, 0) + 1
    if kinds:
        parts.append("remembers " + ", ".join(f"{n} {k}{'s' if n > 1 else ''}" for k, n in sorted(kinds.items())))
    return ProfileItem(
        text="; ".join(parts),
        origin="summary",
        detail="summary",
        source_document_ids=sorted({d for i in items for d in i.source_document_ids}),
        memory_ids=sorted({m for i in items for m in i.memory_ids}),
    )


async def memory_profile(rt: Runtime, viewer: Viewer, req: MemoryProfileRequest) -> MemoryProfile:
    """The tool itself (every door): the viewer's distilled profile, each item citing what it came from."""
    memories = await _memories(rt, viewer, req.workspace)  # 403 naming X-Principal-Id without a principal
    pid = viewer.principal_id
    assert pid is not None  # list_memories refused a viewer without one
    async with rt.pool.acquire() as conn:
        facts = [_fact_item(r) for r in await _facts(conn, req.workspace, viewer.expand(rt.hierarchy), pid)]
    n = req.limit
    role = [f for f in facts if f.detail in ROLE][:n]
    interests = (
        [f for f in facts if f.detail in INTERESTS]
        + [_memory_item(m, req.workspace) for m in memories if m.kind == "preference"]
    )[:n]
    durable = (
        [_memory_item(m, req.workspace) for m in memories if m.kind in ("fact", "decision")]
        + [f for f in facts if f.detail in OTHER]
    )[:n]
    return MemoryProfile(
        principal_id=pid,
        summary=_summary(role, interests, durable),
        role=role,
        interests=interests,
        durable_facts=durable,
    )


__all__ = ["memory_profile"]
