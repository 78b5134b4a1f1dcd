"""Viewer-scoped graph reads. ACL and temporal filters are applied in SQL (``retriever.graph.temporal``),
so facts a viewer may not see never consume a limit. ``viewer`` is the EXPANDED principal list; an empty
list sees nothing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from retriever.graph.temporal import Params, entity_acl_sql, fact_acl_sql, temporal_sql
from schemas.graph import EntityBrief, EntityMatch, Fact, FactChange, FactDiff, FactEvidence, Path, PathStep
from services.names import normalize_name
from services.viewer import Principals

DEFAULT_EXCLUDED = ("mentioned",)
"""Predicates path walks skip unless asked for: low-confidence catch-all links would flood the budget."""

_FACT_COLUMNS = (
    "f.id, f.subject_id, f.predicate, f.object_id, f.value, f.valid_from, f.valid_to, f.recorded_at,"
    " f.invalidated_at, f.time_grain, f.confidence, f.status, s.type AS s_type, s.name AS s_name,"
    " o.type AS o_type, o.name AS o_name,"
    " (SELECT json_agg(json_build_object('document_id', e.document_id, 'chunk_id', e.chunk_id,"
    " 'span_start', e.span_start, 'span_end', e.span_end) ORDER BY e.document_id, e.span_start)"
    " FROM fact_evidence e WHERE e.fact_id = f.id) AS evidence"
)
_FACT_JOINS = " FROM facts f JOIN entities s ON s.id = f.subject_id LEFT JOIN entities o ON o.id = f.object_id"


def _fact(r: asyncpg.Record) -> Fact:
    keys = r.keys()
    evidence = [FactEvidence(**e) for e in json.loads(r["evidence"] or "[]")]
    return Fact(
        id=r["id"],
        subject=EntityBrief(type=r["s_type"], id=r["subject_id"], name=r["s_name"]),
        predicate=r["predicate"],
        object=EntityBrief(type=r["o_type"], id=r["object_id"], name=r["o_name"]) if r["object_id"] else None,
        value=r["value"],
        valid_from=r["valid_from"],
        valid_to=r["valid_to"],
        recorded_at=r["recorded_at"],
        invalidated_at=r["invalidated_at"],
        time_grain=r["time_grain"],
        confidence=r["confidence"],
        status=r["status"],
        evidence=evidence,
        direction=r["direction"] if "direction" in keys else None,
    )


async def current_ids(conn: asyncpg.Connection, ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """Entity ids with merges followed (a merged person answers as the person it was merged into)."""
    rows = await conn.fetch(
        "SELECT id, COALESCE(merged_into, id) AS cur FROM entities WHERE id = ANY($1::uuid[])", list(ids)
    )
    cur = {r["id"]: r["cur"] for r in rows}
    return list(dict.fromkeys(cur.get(i, i) for i in ids))


async def resolve_entities(
    conn: asyncpg.Connection,
    *,
    workspace: str,
    viewer: Principals,
    name: str,
    types: Sequence[str] | None = None,
    limit: int = 5,
) -> list[EntityMatch]:
    """Visible entities named ``name``: exact normalized name 1.0, alias 0.95, name prefix 0.6."""
    norm = normalize_name(name)
    if not norm or not viewer:
        return []
    p = Params()
    ws, nm, vw = p.add(workspace), p.add(norm), p.add(list(viewer))
    type_sql = f" AND e.type = ANY({p.add(list(types))}::text[])" if types else ""
    lim = p.add(limit)
    sql = (
        "WITH c AS ("
        f" SELECT e.id, 1.0 AS score FROM entities e WHERE e.workspace = {ws} AND e.norm_name = {nm}"
        f" UNION ALL SELECT a.entity_id, 0.95 FROM entity_aliases a WHERE a.workspace = {ws} AND a.alias ="
        f" {nm}"
        f" UNION ALL (SELECT e.id, 0.6 FROM entities e WHERE e.workspace = {ws} AND e.norm_name LIKE {nm} ||"
        f" ' %'"
        f" LIMIT 200))"
        " SELECT e.id, e.type, e.name, max(c.score) AS score FROM c JOIN entities e ON e.id = c.id"
        f" WHERE e.merged_into IS NULL{type_sql} AND {entity_acl_sql(vw)}"
        f" GROUP BY e.id, e.type, e.name ORDER BY score DESC, (e.type = 'document'), e.name, e.id LIMIT {lim}"
    )
    rows = await conn.fetch(sql, *p.values)
    return [EntityMatch(type=r["type"], id=r["id"], name=r["name"], score=float(r["score"])) for r in rows]


ABOUT_CANDIDATES = 5
ABOUT_EXACT_SCORE = 0.95


async def resolve_about(
    conn: asyncpg.Connection, *, workspace: str, viewer: Principals, about: str
) -> list[EntityMatch]:
    """The one rule turning an ``about`` name into graph seeds (HTTP graph tools and ``retrieve_context``):
    every visible exact-name or alias match (score >= 0.95), else the single best prefix match."""
    found = await resolve_entities(conn, workspace=workspace, viewer=viewer, name=about, limit=ABOUT_CANDIDATES)
    return [m for m in found if m.score >= ABOUT_EXACT_SCORE] or found[:1]


async def seeds_about(
    conn: asyncpg.Connection,
    *,
    workspace: str,
    viewer: Principals,
    subjects: Sequence[tuple[str, uuid.UUID]],
    about: str | None,
) -> tuple[list[tuple[str, uuid.UUID]], list[EntityMatch] | None]:
    """The graph seeds of a request (graph tools and ``retrieve_context``): the explicit subjects, each once,
    then what ``about`` names (``resolve_about``). Also returns the matches (``None`` without ``about``)."""
    seeds = list(dict.fromkeys(subjects))
    matches = await resolve_about(conn, workspace=workspace, viewer=viewer, about=about) if about else None
    for m in matches or []:
        if (m.type, m.id) not in seeds:
            seeds.append((m.type, m.id))
    return seeds, matches


async def query_facts(
    conn: asyncpg.Connection,
    *,
    workspace: str,
    viewer: Principals,
    subjects: Sequence[tuple[str, uuid.UUID]],
    as_of: datetime | None = None,
    believed_as_of: datetime | None = None,
    as_of_grain: str | None = None,
    limit: int = 50,
    incoming: bool = False,
    direction: str | None = None,
) -> list[Fact]:
    """Facts about ``subjects``, visible and temporally selected, each with its ``direction``.

    ``direction``: ``outgoing`` (the entity is the subject; the default), ``incoming`` (it is the object;
    also ``incoming=True``) or ``both`` (either end: "who founded Voltana" and "what did Marla found" are
    one fact)."""
    if not viewer or not subjects:
        return []
    direction = direction or ("incoming" if incoming else "outgoing")
    if direction not in ("outgoing", "incoming", "both"):
        raise ValueError(f"direction must be outgoing, incoming or both, got {direction!r}")
    ids = await current_ids(conn, [s[1] for s in subjects])
    p = Params()
    ws, sid, vw = p.add(workspace), p.add(ids), p.add(list(viewer))
    when = temporal_sql(p, as_of=as_of, believed_as_of=believed_as_of, as_of_grain=as_of_grain)
    ends = {
        "outgoing": f"f.subject_id = ANY({sid}::uuid[])",
        "incoming": f"f.object_id = ANY({sid}::uuid[])",
        "both": f"(f.subject_id = ANY({sid}::uuid[]) OR f.object_id = ANY({sid}::uuid[]))",
    }[direction]
    dir_sql = f"CASE WHEN f.subject_id = ANY({sid}::uuid[]) THEN 'outgoing' ELSE 'incoming' END AS direction"
    sql = (
        f"SELECT {_FACT_COLUMNS}, {dir_sql}{_FACT_JOINS} WHERE f.workspace = {ws} AND {ends}"
        f" AND {when} AND {fact_acl_sql(vw)}"
        f" ORDER BY (f.predicate = 'mentioned'), f.confidence DESC, f.valid_from DESC, f.id LIMIT"
        f" {p.add(limit)}"
    )
    return [_fact(r) for r in await conn.fetch(sql, *p.values)]


async def entity_briefs(
    conn: asyncpg.Connection, *, workspace: str, viewer: Sequence[str], refs: Sequence[tuple[str, uuid.UUID]]
) -> list[EntityBrief]:
    """Display names of ``refs`` (merges followed), in order, keeping only entities the viewer may see."""
    if not viewer or not refs:
        return []
    ids = await current_ids(conn, [r[1] for r in refs])
    p = Params()
    ws, sid, vw = p.add(workspace), p.add(ids), p.add(list(viewer))
    rows = await conn.fetch(
        f"SELECT e.id, e.type, e.name FROM entities e WHERE e.workspace = {ws} AND e.id = ANY({sid}::uuid[])"
        f" AND {entity_acl_sql(vw)}",
        *p.values,
    )
    found = {r["id"]: EntityBrief(type=r["type"], id=r["id"], name=r["name"]) for r in rows}
    return [found[i] for i in ids if i in found]


async def diff_facts(
    conn: asyncpg.Connection,
    *,
    workspace: str,
    viewer: Principals,
    subjects: Sequence[tuple[str, uuid.UUID]],
    from_time: datetime,
    to_time: datetime,
    axis: str = "world",
    limit: int = 500,
) -> FactDiff:
    """Two snapshots of the subjects' facts (world: as_of; belief: believed_as_of) and what changed."""
    if axis not in ("world", "belief"):
        raise ValueError(f"axis must be world or belief, got {axis!r}")

    async def snap(t: datetime) -> list[Fact]:
        kw: dict[str, Any] = {"as_of": t} if axis == "world" else {"believed_as_of": t}
        return await query_facts(conn, workspace=workspace, viewer=viewer, subjects=subjects, limit=limit, **kw)

    before, after = await snap(from_time), await snap(to_time)
    return diff_snapshots(before, after, axis=axis, from_time=from_time, to_time=to_time)


def _target(f: Fact) -> str:
    return f"e:{f.object.id}" if f.object else "v:" + (f.value or "").casefold()


def diff_snapshots(
    before: Sequence[Fact], after: Sequence[Fact], *, axis: str, from_time: datetime, to_time: datetime
) -> FactDiff:
    """Pure: slots present in both with different targets are ``changed``; the rest added/removed."""

    def slots(facts: Sequence[Fact]) -> dict[tuple[uuid.UUID, str], dict[str, Fact]]:
        out: dict[tuple[uuid.UUID, str], dict[str, Fact]] = {}
        for f in facts:
            out.setdefault((f.subject.id, f.predicate), {})[_target(f)] = f
        return out

    b, a = slots(before), slots(after)
    added: list[Fact] = []
    removed: list[Fact] = []
    changed: list[FactChange] = []
    for key in sorted(set(a) | set(b), key=str):
        bt, at = b.get(key, {}), a.get(key, {})
        if set(bt) == set(at):
            continue
        if bt and at and len(bt) == 1 and len(at) == 1:
            subject = next(iter(at.values())).subject
            changed.append(
                FactChange(subject=subject, predicate=key[1], before=list(bt.values()), after=list(at.values()))
            )
            continue
        added += [f for t, f in at.items() if t not in bt]
        removed += [f for t, f in bt.items() if t not in at]
    return FactDiff(
        axis="belief" if axis == "belief" else "world",
        from_time=from_time,
        to_time=to_time,
        added=added,
        removed=removed,
        changed=changed,
    )


async def query_paths(
    conn: asyncpg.Connection,
    *,
    workspace: str,
    viewer: Principals,
    seeds: Sequence[tuple[str, uuid.UUID]],
    max_depth: int = 2,
    max_fanout: int = 20,
    as_of: datetime | None = None,
    believed_as_of: datetime | None = None,
    limit: int = 20,
    as_of_grain: str | None = None,
    exclude_predicates: Sequence[str] = DEFAULT_EXCLUDED,
) -> list[Path]:
    """Bounded walk (both edge directions) in ONE recursive SQL; each hop's edge passes the temporal
    filter and the all-visible ACL inside the recursion, at most ``max_fanout`` edges per node."""
    if not viewer or not seeds:
        return []
    ids = await current_ids(conn, [s[1] for s in seeds])
    p = Params()
    ws, sd, vw = p.add(workspace), p.add(ids), p.add(list(viewer))
    ex, depth, fan, lim = p.add(list(exclude_predicates)), p.add(max_depth), p.add(max_fanout), p.add(limit)
    when = temporal_sql(p, as_of=as_of, believed_as_of=believed_as_of, as_of_grain=as_of_grain)
    edge = f"f.workspace = {ws} AND f.object_id IS NOT NULL AND NOT (f.predicate = ANY({ex}::text[])) AND {when}"
    sql = (
        "WITH RECURSIVE walk(node, depth, nodes, facts, dirs, score) AS ("
        f" SELECT s.id, 0, ARRAY[s.id], ARRAY[]::uuid[], ARRAY[]::text[], 1.0::float8 FROM"
        f" unnest({sd}::uuid[]) s(id)"
        " UNION ALL"
        " SELECT nx.other, w.depth + 1, w.nodes || nx.other, w.facts || nx.fact_id, w.dirs || nx.dir,"
        " w.score * nx.confidence FROM walk w CROSS JOIN LATERAL ("
        "  SELECT * FROM (SELECT DISTINCT ON (c.other) c.* FROM ("
        f"   SELECT f.id AS fact_id, f.object_id AS other, 'outgoing'::text AS dir, f.confidence::float8 AS"
        f" confidence"
        f"   FROM facts f WHERE f.subject_id = w.node AND {edge} AND {fact_acl_sql(vw)}"
        "   UNION ALL"
        f"   SELECT f.id, f.subject_id, 'incoming'::text, f.confidence::float8"
        f"   FROM facts f WHERE f.object_id = w.node AND {edge} AND {fact_acl_sql(vw)}"
        "  ) c WHERE NOT (c.other = ANY(w.nodes)) ORDER BY c.other, c.confidence DESC, c.fact_id) d"
        f"  ORDER BY d.confidence DESC, d.fact_id LIMIT {fan}"
        f" ) nx WHERE w.depth < {depth})"
        f" SELECT nodes, facts, dirs, score FROM walk WHERE depth > 0 ORDER BY score DESC, depth, nodes"
        f" LIMIT {lim}"
    )
    rows = await conn.fetch(sql, *p.values)
    if not rows:
        return []
    node_ids = {n for r in rows for n in r["nodes"]}
    fact_ids = {f for r in rows for f in r["facts"]}
    ents = {
        r["id"]: EntityBrief(type=r["type"], id=r["id"], name=r["name"])
        for r in await conn.fetch("SELECT id, type, name FROM entities WHERE id = ANY($1::uuid[])", list(node_ids))
    }
    preds = {
        r["id"]: r["predicate"]
        for r in await conn.fetch("SELECT id, predicate FROM facts WHERE id = ANY($1::uuid[])", list(fact_ids))
    }
    paths: list[Path] = []
    for r in rows:
        nodes = [ents[n] for n in r["nodes"]]
        steps = []
        for i, (fid, d) in enumerate(zip(r["facts"], r["dirs"], strict=True)):
            a, b = nodes[i], nodes[i + 1]
            src, dst = (a, b) if d == "outgoing" else (b, a)
            steps.append(PathStep(fact_id=fid, predicate=preds[fid], direction=d, source=src, target=dst))
        paths.append(Path(seed=nodes[0], nodes=nodes, steps=steps, score=float(r["score"])))
    return paths


async def query_paths_within(
    conn: asyncpg.Connection, *, budget_ms: int, max_depth: int, **walk: Any
) -> tuple[list[Path], int, bool]:
    """``query_paths`` inside a work budget: the full depth first with half the budget, then one level
    shallower with half of what is left, down to depth 1. Returns ``(paths, depth walked, partial)``;
    ``partial`` means the budget cut the walk short of ``max_depth``. A budget too small even for
    depth 1 raises ``asyncpg.QueryCanceledError``."""
    share = budget_ms / 2
    depth = max_depth
    while True:
        try:
            async with conn.transaction(readonly=True):
                await conn.execute(f"SET LOCAL statement_timeout = {max(int(share), 50)}")
                paths = await query_paths(conn, max_depth=depth, **walk)
            return paths, depth, depth < max_depth
        except asyncpg.QueryCanceledError:
            if depth <= 1:
                raise
            depth -= 1
            share /= 2


async def relational_evidence(
    conn: asyncpg.Connection,
    *,
    workspace: str,
    viewer: Principals,
    predicate: str,
    seed: str,
    direction: str,
    limit: int = 50,
) -> list[uuid.UUID]:
    """Child chunk ids of the evidence documents of the seed's current typed edges with ``predicate``
    (``incoming``: the seed is the object), evidence chunks first. ACL-filtered; [] when nothing resolves."""
    if direction not in ("incoming", "outgoing"):
        raise ValueError(f"direction must be incoming or outgoing, got {direction!r}")
    matches = await resolve_entities(conn, workspace=workspace, viewer=viewer, name=seed, limit=5)
    exact = [m.id for m in matches if m.score >= 0.95] or [m.id for m in matches]
    if not exact:
        return []
    p = Params()
    ws, sd, vw, pr = p.add(workspace), p.add(exact), p.add(list(viewer)), p.add(predicate)
    col = "f.object_id" if direction == "incoming" else "f.subject_id"
    sql = (
        "WITH ev AS (SELECT e.document_id, e.chunk_id FROM facts f JOIN fact_evidence e ON e.fact_id = f.id"
        f" WHERE f.workspace = {ws} AND f.predicate = {pr} AND {col} = ANY({sd}::uuid[]) AND f.object_id IS"
        f" NOT NULL"
        f" AND {temporal_sql(p)} AND {fact_acl_sql(vw)})"
        " SELECT c.id FROM chunks c WHERE c.document_id IN (SELECT document_id FROM ev) AND NOT c.is_parent"
        f" AND NOT c.deleted AND c.principals && {vw}::text[]"
        f" ORDER BY (c.id IN (SELECT chunk_id FROM ev WHERE chunk_id IS NOT NULL)) DESC, c.event_time DESC,"
        f" c.document_id, c.ordinal LIMIT {p.add(limit)}"
    )
    return [r["id"] for r in await conn.fetch(sql, *p.values)]
