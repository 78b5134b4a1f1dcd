"""Fact, path, diff and relational channels of ``retrieve_context``, through the graph read contract.

``services.graph.reads`` (runtime floor) is used fail-open: missing graph tables
(``asyncpg.UndefinedTableError``) yield an empty channel and a note in diagnostics — never an error on
the passage hot path. Every graph read applies
the all-visible evidence ACL itself, so nothing here can widen what the viewer sees.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import asyncpg

from retriever.relational_query import SYMMETRIC_PREDICATES, parse_relational_query
from services.graph import reads
from services.viewer import Principals

log = logging.getLogger("orgmem.retriever.graph")
T = TypeVar("T")
MAX_FACTS = 50
MAX_PATHS = 20
RELATIONAL_LIMIT = 50


def jsonable(obj: Any) -> Any:
    """A graph read result as plain JSON data (pydantic models, dataclasses, uuids, datetimes)."""
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return jsonable(dataclasses.asdict(obj))
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [jsonable(v) for v in obj]
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if isinstance(obj, datetime):
        return obj.isoformat()
    return obj


async def graph_read(call: Awaitable[T], notes: dict[str, str], channel: str) -> T | None:
    """Await one ``services.graph.reads`` call; None (and a note) when the graph tables are missing."""
    try:
        return await call
    except asyncpg.UndefinedTableError:
        notes[channel] = "unavailable: graph tables not migrated"
        return None


@dataclass
class GraphContext:
    structured_facts: list[dict[str, Any]] = field(default_factory=list)
    paths: list[dict[str, Any]] = field(default_factory=list)
    fact_diffs: list[dict[str, Any]] = field(default_factory=list)
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
    """Explicit subjects plus entities named by ``about`` (``reads.resolve_about``, under the viewer's ACL)."""
    ctx.seeds = list(dict.fromkeys(subjects))
    if about:
        matches = await graph_read(
            reads.resolve_about(conn, workspace=workspace, viewer=viewer, about=about),
            ctx.notes,
            "about",
        )
        for m in matches or []:
            ctx.resolved_about.append({"type": str(m.type), "id": str(m.id), "name": str(m.name)})
            if (m.type, m.id) not in ctx.seeds:
                ctx.seeds.append((m.type, m.id))
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
    facts = await graph_read(
        reads.query_facts(
            conn,
            workspace=workspace,
            viewer=viewer,
            subjects=ctx.seeds,
            as_of=as_of,
            believed_as_of=believed_as_of,
            as_of_grain=grain,
            limit=MAX_FACTS,
            direction="both",  # facts where a seed is the subject AND where it is the object
        ),
        ctx.notes,
        "structured_facts",
    )
    ctx.structured_facts = [jsonable(f) for f in facts or []]
    paths = await graph_read(
        reads.query_paths(
            conn,
            workspace=workspace,
            viewer=viewer,
            seeds=ctx.seeds,
            max_depth=2,
            max_fanout=20,
            as_of=as_of,
            believed_as_of=believed_as_of,
            limit=MAX_PATHS,
        ),
        ctx.notes,
        "paths",
    )
    ctx.paths = [jsonable(p) for p in paths or []]
    if diff_range is not None:
        diff = await graph_read(
            reads.diff_facts(
                conn,
                workspace=workspace,
                viewer=viewer,
                subjects=ctx.seeds,
                from_time=diff_range[0],
                to_time=diff_range[1],
                axis="world",
            ),
            ctx.notes,
            "fact_diffs",
        )
        if diff is not None:
            ctx.fact_diffs = [jsonable(diff)]


@dataclass
class RelationalResult:
    chunk_ids: list[str] = field(default_factory=list)
    search_facts: list[dict[str, Any]] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)
    parsed: dict[str, Any] | None = None


async def relational_arm(
    conn: asyncpg.Connection, *, workspace: str, viewer: Principals, query: str
) -> RelationalResult:
    """Relationship questions ("who founded Acme"): evidence chunks of the seed's typed edges (fail-open)."""
    out = RelationalResult()
    rq = parse_relational_query(query)
    if rq is None:
        out.notes["relational"] = "not a relationship question"
        return out
    out.parsed = {"predicate": rq.predicate, "direction": rq.direction, "role": rq.role}
    directions = ("incoming", "outgoing") if rq.predicate in SYMMETRIC_PREDICATES else (rq.direction,)
    ids: list[str] = []
    for direction in directions:
        found = await graph_read(
            reads.relational_evidence(
                conn,
                workspace=workspace,
                viewer=viewer,
                predicate=rq.predicate,
                seed=rq.seed,
                direction=direction,
                limit=RELATIONAL_LIMIT,
            ),
            out.notes,
            "relational",
        )
        ids.extend(str(i) for i in found or [])
    out.chunk_ids = list(dict.fromkeys(ids))[:RELATIONAL_LIMIT]
    matches = await graph_read(
        reads.resolve_entities(
            conn,
            workspace=workspace,
            viewer=viewer,
            name=rq.seed,
            types=None,
            limit=1,
        ),
        out.notes,
        "search_facts",
    )
    if matches:
        facts = await graph_read(
            reads.query_facts(
                conn,
                workspace=workspace,
                viewer=viewer,
                subjects=[(matches[0].type, matches[0].id)],
                limit=MAX_FACTS,
                incoming=rq.direction == "incoming",  # "who founded Acme": Acme is the edges' object
            ),
            out.notes,
            "search_facts",
        )
        dumped = [jsonable(f) for f in facts or []]
        same = [f for f in dumped if isinstance(f, dict) and f.get("predicate") == rq.predicate]
        out.search_facts = (same or dumped)[:10]
    return out
