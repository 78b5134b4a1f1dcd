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

from retriever.graph.profile_parts import (
    FACT_LIMIT,
    _activity,
    _aliases,
    _bound_slot,
    _collaborators,
    _fact_field,
    _link_field,
    _merge,
    _person_ids,
    _pick,
)
from retriever.graph.projects import PROJECT_TYPES, person_projects, project_people
from retriever.graph.reads import current_ids, query_facts, resolve_entities
from retriever.graph.temporal import Params, entity_acl_sql
from schemas.graph import EntityBrief, Fact
from schemas.worldbuilder import Profile, ProfileField
from services.viewer import Principals

PROFILE_VERSION = "1"


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
