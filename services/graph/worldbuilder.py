"""Worldbuilder profiles: a deterministic profile of a person, team, project/product or glossary term,
assembled from the viewer's visible facts, collaboration edges, person↔project links and documents.

Every field carries its evidence document ids and ``as_of``. Profiles are cached **by evidence-document
set**: the key is a digest of the documents (id + current version) the viewer can see that support the
entity, plus a fingerprint of its facts, so two viewers with the same visible evidence share a profile and
a viewer who sees less gets a different one. Every hit is **re-grounded**: a field or item is kept only
when every one of its evidence documents is visible to THIS viewer now (and the entity it names is
visible), so an ACL change or tombstone reshapes the next profile and no field is ever served from
another viewer's view. The summary is rebuilt from the grounded fields.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import asyncpg

from schemas.graph import EntityBrief, Fact, ProjectLink
from schemas.worldbuilder import Profile, ProfileField
from services.decay import HALF_LIFE_DAYS
from services.graph.projects import PROJECT_TYPES, person_projects, project_people
from services.graph.reads import current_ids, query_facts, resolve_entities
from services.graph.temporal import Params, entity_acl_sql
from services.people import visible_aliases
from services.viewer import Principals

PROFILE_VERSION = "1"
FACT_LIMIT = 300
LIST_LIMIT = 10
ACTIVITY_LIMIT = 5
CACHE_KEEP = 8
KIND_OF = {
    "person": "person",
    "team": "team",
    "division": "team",
    "project": "project",
    "product": "product",
    "glossary_term": "glossary_term",
    "organization": "organization",
}


# --- resolution --------------------------------------------------------------------------------


async def resolve(
    conn: asyncpg.Connection,
    *,
    workspace: str,
    viewer: Principals,
    name: str | None = None,
    subject: tuple[str, uuid.UUID] | None = None,
    type_hint: str | None = None,
) -> tuple[EntityBrief | None, list[EntityBrief]]:
    """The visible entity a lookup is about, and the other visible candidates for ``name``."""
    if subject is not None:
        [cur] = await current_ids(conn, [subject[1]])
        p = Params()
        ws, eid, vw = p.add(workspace), p.add(cur), p.add(list(viewer))
        row = await conn.fetchrow(
            f"SELECT e.id, e.type, e.name FROM entities e WHERE e.workspace = {ws} AND e.id = {eid}"
            f" AND {entity_acl_sql(vw)}",
            *p.values,
        )
        return (EntityBrief(type=row["type"], id=row["id"], name=row["name"]) if row else None), []
    assert name is not None
    types = [type_hint] if type_hint and type_hint != "other" else None
    found = await resolve_entities(conn, workspace=workspace, viewer=viewer, name=name, types=types, limit=5)
    found = [m for m in found if m.type != "document"]
    if not found:
        return None, []
    briefs = [EntityBrief(type=m.type, id=m.id, name=m.name) for m in found]
    return briefs[0], briefs[1:]


# --- evidence key ------------------------------------------------------------------------------


async def _person_ids(conn: asyncpg.Connection, entity: uuid.UUID) -> list[uuid.UUID]:
    rows = await conn.fetch("SELECT id FROM people WHERE id = $1 OR merged_into = $1", entity)
    return [r["id"] for r in rows] or [entity]


async def evidence_key(
    conn: asyncpg.Connection, *, workspace: str, viewer: Principals, entity: EntityBrief
) -> tuple[str, list[uuid.UUID]]:
    """Digest of the visible evidence-document set (ids + versions) and the entity's fact fingerprint."""
    people = await _person_ids(conn, entity.id) if entity.type == "person" else []
    row = await conn.fetchrow(
        "WITH ev AS ("
        " SELECT fe.document_id FROM facts f JOIN fact_evidence fe ON fe.fact_id = f.id"
        " WHERE f.workspace = $1 AND (f.subject_id = $2 OR f.object_id = $2)"
        " UNION SELECT document_id FROM participants WHERE person_id = ANY($3::uuid[])"
        " UNION SELECT document_id FROM entity_evidence WHERE entity_id = $2)"
        " SELECT COALESCE(string_agg(d.id::text || ':' || d.current_version, ',' ORDER BY d.id), '') AS docs,"
        " COALESCE(array_agg(d.id ORDER BY d.id) FILTER (WHERE d.id IS NOT NULL), '{}') AS ids,"
        " (SELECT count(*)::text || '/' || COALESCE(max(recorded_at)::text, '') || '/'"
        "  || COALESCE(max(invalidated_at)::text, '') || '/' || COALESCE(max(valid_to)::text, '')"
        "  FROM facts WHERE workspace = $1 AND (subject_id = $2 OR object_id = $2))"
        " || '/' || (SELECT count(*)::text || '/' || COALESCE(max(decided_at)::text, '') FROM taxonomy_proposals"
        "  WHERE workspace = $1 AND subject_id = $2 AND status IN ('applied', 'rejected')) AS facts"
        " FROM documents d JOIN ev ON ev.document_id = d.id"
        " WHERE d.deleted_at IS NULL AND d.principals && $4::text[]",
        workspace,
        entity.id,
        people,
        list(viewer),
    )
    digest = hashlib.sha256(
        f"{PROFILE_VERSION}|{workspace}|{entity.id}|{row['docs']}|{row['facts']}".encode()
    ).hexdigest()
    return digest, list(row["ids"])


# --- assembly ----------------------------------------------------------------------------------


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


async def assemble(conn: asyncpg.Connection, *, workspace: str, viewer: Principals, entity: EntityBrief) -> Profile:
    """The deterministic profile from what ``viewer`` can see (no summary: built after grounding)."""
    facts = await query_facts(
        conn,
        workspace=workspace,
        viewer=viewer,
        subjects=[(entity.type, entity.id)],
        limit=FACT_LIMIT,
        direction="both",
    )
    kind = KIND_OF.get(entity.type, "other")
    aliases, platform = await _aliases(conn, entity, viewer)
    out: dict[str, Any] = {"subject": entity, "kind": kind, "aliases": aliases, "platform_user_id": platform}

    def first(fs: Sequence[Fact]) -> ProfileField | None:  # facts come best first
        return _fact_field(fs[0]) if fs else None

    if kind == "person":
        out["title"] = await _bound_slot(conn, workspace, viewer, entity, facts, "has_title", None)
        out["team"] = await _bound_slot(conn, workspace, viewer, entity, facts, "member_of", ["team"])
        out["manager"] = await _bound_slot(conn, workspace, viewer, entity, facts, "reports_to", None)
        reports = [_fact_field(f) for f in _pick(facts, "reports_to", "incoming")]
        reports += [_fact_field(f) for f in _pick(facts, "manages", "outgoing", ["person"])]
        out["reports"] = _merge(reports)
        projects = [_fact_field(f) for f in _pick(facts, "works_on", "outgoing")]
        projects += [_fact_field(f) for f in _pick(facts, "owns", "outgoing", PROJECT_TYPES)]
        projects += [_fact_field(f) for f in _pick(facts, "manages", "outgoing", ["project"])]
        projects += map(_link_field, await person_projects(conn, workspace=workspace, viewer=viewer, person=entity.id))
        out["current_projects"] = _merge(projects)
        out["key_collaborators"] = await _collaborators(conn, workspace, viewer, entity.id)
    elif kind == "team":
        out["members"] = _merge(_fact_field(f) for f in _pick(facts, "member_of", "incoming"))
        out["owners"] = _merge(_fact_field(f) for f in _pick(facts, "manages", "incoming"))
        out["part_of"] = first(_pick(facts, "part_of", "outgoing"))
        out["current_projects"] = _merge(_fact_field(f) for f in _pick(facts, "works_on", "outgoing"))
    elif kind in ("project", "product"):
        owners = [_fact_field(f) for p in ("owns", "manages", "founded") for f in _pick(facts, p, "incoming")]
        out["owners"] = _merge(owners)
        members = [_fact_field(f) for f in _pick(facts, "works_on", "incoming")]
        members += map(_link_field, await project_people(conn, workspace=workspace, viewer=viewer, entity=entity.id))
        out["members"] = _merge(members)
    elif kind == "glossary_term":
        out["definition"] = first(_pick(facts, "has_definition", "outgoing"))
    else:
        out["owners"] = _merge(_fact_field(f) for f in _pick(facts, "founded", "incoming"))
        out["members"] = _merge(_fact_field(f) for f in _pick(facts, "works_at", "incoming"))
    out["recent_activity"] = await _activity(conn, workspace, viewer, entity)
    return Profile(**out)


# --- grounding ---------------------------------------------------------------------------------

_SINGLE = ("title", "team", "manager", "part_of", "definition")
_LISTS = ("reports", "current_projects", "key_collaborators", "members", "owners", "recent_activity")


def profile_fields(profile: Profile) -> list[ProfileField]:
    out = [f for n in _SINGLE if (f := getattr(profile, n)) is not None]
    return out + [f for n in _LISTS for f in getattr(profile, n)]


async def reground(conn: asyncpg.Connection, *, workspace: str, viewer: Principals, profile: Profile) -> Profile:
    """Drop every field whose evidence is not all visible to ``viewer`` now, or whose entity is not."""
    fields = profile_fields(profile)
    docs = sorted({d for f in fields for d in f.evidence}, key=str)
    ents = sorted({f.entity.id for f in fields if f.entity is not None}, key=str)
    visible_docs = {
        r["id"]
        for r in await conn.fetch(
            "SELECT id FROM documents WHERE id = ANY($1::uuid[]) AND deleted_at IS NULL AND principals && $2::text[]",
            docs,
            list(viewer),
        )
    }
    p = Params()
    ws, ids, vw = p.add(workspace), p.add(ents), p.add(list(viewer))
    visible_ents = {
        r["id"]
        for r in await conn.fetch(
            f"SELECT e.id FROM entities e WHERE e.workspace = {ws} AND e.id = ANY({ids}::uuid[])"
            f" AND {entity_acl_sql(vw)}",
            *p.values,
        )
    }

    def ok(f: ProfileField) -> bool:
        if f.source != "alias" and not f.evidence:
            return False
        if any(d not in visible_docs for d in f.evidence):
            return False
        return f.entity is None or f.entity.id in visible_ents

    update: dict[str, Any] = {
        n: (f if f is not None and ok(f) else None) for n in _SINGLE if (f := getattr(profile, n))
    }
    # aliases carry no evidence list: they are read again for THIS viewer (never served from the cache)
    update["aliases"], update["platform_user_id"] = await _aliases(conn, profile.subject, viewer)
    update |= {n: [f for f in getattr(profile, n) if ok(f)] for n in _LISTS}
    return profile.model_copy(update=update)


def summarize(profile: Profile) -> ProfileField | None:
    """A deterministic one-paragraph summary from the (grounded) fields; its evidence is theirs."""
    s, parts, used = profile.subject, [], []

    def take(f: ProfileField | None) -> str | None:
        if f is None:
            return None
        used.append(f)
        return f.value

    def names(fs: Sequence[ProfileField], n: int = 3) -> str | None:
        if not fs:
            return None
        used.extend(fs[:n])
        return ", ".join(f.value for f in fs[:n])

    if profile.kind == "person":
        title, team, manager = take(profile.title), take(profile.team), take(profile.manager)
        head = s.name + (f" is {title}" if title else "") + (f" on the {team} team" if team else "")
        parts.append(head + (f", reporting to {manager}" if manager else ""))
        if r := names(profile.reports):
            parts.append(f"Reports: {r}")
        if pr := names(profile.current_projects):
            parts.append(f"Works on {pr}")
        if c := names(profile.key_collaborators):
            parts.append(f"Works most with {c}")
    elif profile.kind == "glossary_term":
        d = take(profile.definition)
        parts.append(f"{s.name}: {d}" if d else s.name)
    else:
        parts.append(f"{s.name} ({profile.kind})")
        if o := names(profile.owners):
            parts.append(f"Led/owned by {o}")
        if m := names(profile.members):
            parts.append(f"People: {m}")
        if pt := take(profile.part_of):
            parts.append(f"Part of {pt}")
        if pr := names(profile.current_projects):
            parts.append(f"Works on {pr}")
    if not used:
        return None
    times = [f.as_of for f in used if f.as_of is not None]
    return ProfileField(
        value=". ".join(parts) + ".",
        evidence=sorted({d for f in used for d in f.evidence}, key=str),
        as_of=max(times) if times else None,
        source="summary",
    )


# --- cache -------------------------------------------------------------------------------------


async def cached(conn: asyncpg.Connection, workspace: str, entity: uuid.UUID, key: str) -> Profile | None:
    raw = await conn.fetchval(
        "UPDATE worldbuilder_profiles SET hits = hits + 1, last_hit_at = now()"
        " WHERE workspace = $1 AND entity_id = $2 AND evidence_key = $3 RETURNING profile",
        workspace,
        entity,
        key,
    )
    return Profile.model_validate(json.loads(raw)) if raw else None


async def store(conn: asyncpg.Connection, workspace: str, entity: uuid.UUID, key: str, profile: Profile) -> None:
    await conn.execute(
        "INSERT INTO worldbuilder_profiles (workspace, entity_id, evidence_key, profile) VALUES ($1, $2, $3, $4::jsonb)"
        " ON CONFLICT (workspace, entity_id, evidence_key) DO UPDATE SET profile = EXCLUDED.profile, built_at = now()",
        workspace,
        entity,
        key,
        profile.model_dump_json(),
    )
    await conn.execute(
        "DELETE FROM worldbuilder_profiles w WHERE w.workspace = $1 AND w.entity_id = $2 AND w.evidence_key NOT IN"
        " (SELECT evidence_key FROM worldbuilder_profiles WHERE workspace = $1 AND entity_id = $2"
        "  ORDER BY COALESCE(last_hit_at, built_at) DESC LIMIT $3)",
        workspace,
        entity,
        CACHE_KEEP,
    )


async def lookup(
    conn: asyncpg.Connection, *, workspace: str, viewer: Principals, entity: EntityBrief
) -> tuple[Profile, str, list[uuid.UUID]]:
    """(grounded profile with its summary, "hit" | "miss", evidence document ids of the returned fields)."""
    key, _ = await evidence_key(conn, workspace=workspace, viewer=viewer, entity=entity)
    profile = await cached(conn, workspace, entity.id, key)
    state = "hit"
    if profile is None:
        state = "miss"
        profile = await assemble(conn, workspace=workspace, viewer=viewer, entity=entity)
        await store(conn, workspace, entity.id, key, profile)
    grounded = await reground(conn, workspace=workspace, viewer=viewer, profile=profile)
    grounded = grounded.model_copy(update={"summary": summarize(grounded)})
    docs = sorted({d for f in profile_fields(grounded) for d in f.evidence}, key=str)
    return grounded, state, docs


def last_seen(fields: Iterable[ProfileField]) -> datetime | None:
    times = [f.as_of for f in fields if f.as_of is not None]
    return max(times) if times else None
