"""Fact, path, diff and relational channels of ``retrieve_context``, through the graph read contract.

``services.graph.reads`` is owned by the graph stage. It is imported lazily and used fail-open: a
missing module or function, or missing graph tables (``asyncpg.UndefinedTableError``), yields an empty
channel and a note in diagnostics — never an error on the passage hot path. Every graph read applies
the all-visible evidence ACL itself, so nothing here can widen what the viewer sees.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from retriever.relational_query import SYMMETRIC_PREDICATES, parse_relational_query

log = logging.getLogger("orgmem.retriever.graph")
READS_MODULE = "services.graph.reads"
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


_MISSING_CHECKED_AT: list[float] = []
RETRY_IMPORT_S = 30.0


def _reads_module() -> Any | None:
    """The graph reads module; a failed import is retried at most every ``RETRY_IMPORT_S`` (hot path)."""
    if _MISSING_CHECKED_AT and time.monotonic() - _MISSING_CHECKED_AT[0] < RETRY_IMPORT_S:
        return None
    try:
        module = importlib.import_module(READS_MODULE)
    except ImportError:
        _MISSING_CHECKED_AT[:] = [time.monotonic()]
        return None
    _MISSING_CHECKED_AT.clear()
    return module


async def graph_read(conn: asyncpg.Connection, fn: str, notes: dict[str, str], channel: str, **kwargs: Any) -> Any:
    """Call ``services.graph.reads.<fn>(conn, **kwargs)``; None (and a note) when unavailable."""
    reads = _reads_module()
    if reads is None:
        notes[channel] = f"unavailable: {READS_MODULE} not installed"
        return None
    func = getattr(reads, fn, None)
    if func is None:
        notes[channel] = f"unavailable: {READS_MODULE}.{fn} missing"
        return None
    try:
        return await func(conn, **kwargs)
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
    viewer: Sequence[str],
    subjects: Sequence[tuple[str, uuid.UUID]],
    about: str | None,
    ctx: GraphContext,
) -> None:
    """Explicit subjects plus entities named by ``about`` (resolved under the viewer's ACL)."""
    ctx.seeds = list(dict.fromkeys(subjects))
    if about:
        matches = await graph_read(
            conn,
            "resolve_entities",
            ctx.notes,
            "about",
            workspace=workspace,
            viewer=list(viewer),
            name=about,
            types=None,
            limit=5,
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
    viewer: Sequence[str],
    ctx: GraphContext,
    as_of: datetime | None,
    believed_as_of: datetime | None,
    grain: str | None,
    diff_range: tuple[datetime, datetime] | None,
) -> None:
    """Facts, bounded paths and (for snapshot ranges) fact diffs of the resolved seeds."""
    if not ctx.seeds:
        return
    v = list(viewer)
    facts = await graph_read(
        conn,
        "query_facts",
        ctx.notes,
        "structured_facts",
        workspace=workspace,
        viewer=v,
        subjects=ctx.seeds,
        as_of=as_of,
        believed_as_of=believed_as_of,
        as_of_grain=grain,
        limit=MAX_FACTS,
        direction="both",  # facts where a seed is the subject AND where it is the object
    )
    ctx.structured_facts = [jsonable(f) for f in facts or []]
    paths = await graph_read(
        conn,
        "query_paths",
        ctx.notes,
        "paths",
        workspace=workspace,
        viewer=v,
        seeds=ctx.seeds,
        max_depth=2,
        max_fanout=20,
        as_of=as_of,
        believed_as_of=believed_as_of,
        limit=MAX_PATHS,
    )
    ctx.paths = [jsonable(p) for p in paths or []]
    if diff_range is not None:
        diff = await graph_read(
            conn,
            "diff_facts",
            ctx.notes,
            "fact_diffs",
            workspace=workspace,
            viewer=v,
            subjects=ctx.seeds,
            from_time=diff_range[0],
            to_time=diff_range[1],
            axis="world",
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
    conn: asyncpg.Connection, *, workspace: str, viewer: Sequence[str], query: str
) -> RelationalResult:
    """Relationship questions ("who founded Acme"): evidence chunks of the seed's typed edges (fail-open)."""
    out = RelationalResult()
    rq = parse_relational_query(query)
    if rq is None:
        out.notes["relational"] = "not a relationship question"
        return out
    out.parsed = {"predicate": rq.predicate, "direction": rq.direction, "role": rq.role}
    v = list(viewer)
    directions = ("incoming", "outgoing") if rq.predicate in SYMMETRIC_PREDICATES else (rq.direction,)
    ids: list[str] = []
    for direction in directions:
        found = await graph_read(
            conn,
            "relational_evidence",
            out.notes,
            "relational",
            workspace=workspace,
            viewer=v,
            predicate=rq.predicate,
            seed=rq.seed,
            direction=direction,
            limit=RELATIONAL_LIMIT,
        )
        ids.extend(str(i) for i in found or [])
    out.chunk_ids = list(dict.fromkeys(ids))[:RELATIONAL_LIMIT]
    matches = await graph_read(
        conn,
        "resolve_entities",
        out.notes,
        "search_facts",
        workspace=workspace,
        viewer=v,
        name=rq.seed,
        types=None,
        limit=1,
    )
    if matches:
        facts = await graph_read(
            conn,
            "query_facts",
            out.notes,
            "search_facts",
            workspace=workspace,
            viewer=v,
            subjects=[(matches[0].type, matches[0].id)],
            limit=MAX_FACTS,
            incoming=rq.direction == "incoming",  # "who founded Acme": Acme is the edges' object
        )
        dumped = [jsonable(f) for f in facts or []]
        same = [f for f in dumped if isinstance(f, dict) and f.get("predicate") == rq.predicate]
        out.search_facts = (same or dumped)[:10]
    return out
