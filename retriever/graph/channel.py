"""Fact, path, diff and relational channels of ``retrieve_context``, over the graph's reads next door
(``retriever.graph.reads``). Results stay typed (``Fact``, ``Path``, ``FactDiff``) through packing, the
fabric join and gap analysis; they become JSON only in the response. Every graph read applies the
all-visible evidence ACL itself, so nothing here can widen what the viewer sees.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from retriever.graph import reads
from retriever.graph.relational_query import SYMMETRIC_PREDICATES, parse_relational_query
from schemas.graph import Fact, FactDiff, Path
from services.viewer import Principals

MAX_FACTS = 50
MAX_PATHS = 20
RELATIONAL_LIMIT = 50


@dataclass
class GraphContext:
    structured_facts: list[Fact] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)
    fact_diffs: list[FactDiff] = field(default_factory=list)
    seeds: list[tuple[str, uuid.UUID]] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)
    resolved_about: list[dict[str, str]] = field(default_factory=list)


async def resolve_seeds(
    conn: asyncpg.Connection,
    *,
    workspace: str,
    viewer: Principals,
    subjects: Sequence[tuple[str, uuid.UUID]],
    about: str | None,
    ctx: GraphContext,
) -> None:
    """Explicit subjects plus entities named by ``about`` (``reads.seeds_about``, under the viewer's ACL)."""
    ctx.seeds, matches = await reads.seeds_about(
        conn, workspace=workspace, viewer=viewer, subjects=subjects, about=about
    )
    for m in matches or []:
        ctx.resolved_about.append({"type": str(m.type), "id": str(m.id), "name": str(m.name)})
    if matches == []:
        ctx.notes.setdefault("about", "no visible entity matched")


async def expand_graph(
    conn: asyncpg.Connection,
    *,
    workspace: str,
    viewer: Principals,
    ctx: GraphContext,
    as_of: datetime | None,
    believed_as_of: datetime | None,
    grain: str | None,
    diff_range: tuple[datetime, datetime] | None,
) -> None:
    """Facts, bounded paths and (for snapshot ranges) fact diffs of the resolved seeds."""
    if not ctx.seeds:
        return
    ctx.structured_facts = await reads.query_facts(
        conn,
        workspace=workspace,
        viewer=viewer,
        subjects=ctx.seeds,
        as_of=as_of,
        believed_as_of=believed_as_of,
        as_of_grain=grain,
        limit=MAX_FACTS,
        direction="both",  # facts where a seed is the subject AND where it is the object
    )
    ctx.paths = await reads.query_paths(
        conn,
        workspace=workspace,
        viewer=viewer,
        seeds=ctx.seeds,
        max_depth=2,
        max_fanout=20,
        as_of=as_of,
        believed_as_of=believed_as_of,
        limit=MAX_PATHS,
    )
    if diff_range is not None:
        diff = await reads.diff_facts(
            conn,
            workspace=workspace,
            viewer=viewer,
            subjects=ctx.seeds,
            from_time=diff_range[0],
            to_time=diff_range[1],
            axis="world",
        )
        ctx.fact_diffs = [diff]


@dataclass
class RelationalResult:
    chunk_ids: list[str] = field(default_factory=list)
    search_facts: list[Fact] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)
    parsed: dict[str, Any] | None = None


async def relational_arm(
    conn: asyncpg.Connection, *, workspace: str, viewer: Principals, query: str
) -> RelationalResult:
    """Relationship questions ("who founded Acme"): evidence chunks of the seed's typed edges."""
    out = RelationalResult()
    rq = parse_relational_query(query)
    if rq is None:
        out.notes["relational"] = "not a relationship question"
        return out
    out.parsed = {"predicate": rq.predicate, "direction": rq.direction, "role": rq.role}
    directions = ("incoming", "outgoing") if rq.predicate in SYMMETRIC_PREDICATES else (rq.direction,)
    ids: list[str] = []
    for direction in directions:
        found = await reads.relational_evidence(
            conn,
            workspace=workspace,
            viewer=viewer,
            predicate=rq.predicate,
            seed=rq.seed,
            direction=direction,
            limit=RELATIONAL_LIMIT,
        )
        ids.extend(str(i) for i in found)
    out.chunk_ids = list(dict.fromkeys(ids))[:RELATIONAL_LIMIT]
    matches = await reads.resolve_entities(conn, workspace=workspace, viewer=viewer, name=rq.seed, limit=1)
    if matches:
        facts = await reads.query_facts(
            conn,
            workspace=workspace,
            viewer=viewer,
            subjects=[(matches[0].type, matches[0].id)],
            limit=MAX_FACTS,
            incoming=rq.direction == "incoming",  # "who founded Acme": Acme is the edges' object
        )
        same = [f for f in facts if f.predicate == rq.predicate]
        out.search_facts = (same or facts)[:10]
    return out
