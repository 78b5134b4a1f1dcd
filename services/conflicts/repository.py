"""SQL of the conflicts stage (asyncpg): entities, people, facts, evidence, merges, proposals."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import asyncpg

from services.conflicts.resolution import SlotFact, SlotUpdate, target_key
from services.db.pairs import PAIR_IN, ids_by_pair
from services.names import normalize_name

STAGE = "conflicts"


async def lock_slots(conn: asyncpg.Connection, keys: Iterable[str]) -> None:
    """Serialise writers of the same slots (sorted: no lock-order deadlocks between consumers)."""
    ordered = sorted(set(keys))
    if ordered:
        await conn.execute(
            "SELECT pg_advisory_xact_lock(h) FROM (SELECT DISTINCT hashtextextended(k, 0) AS h"
            " FROM unnest($1::text[]) AS k ORDER BY 1) s",
            ordered,
        )


# --- people ------------------------------------------------------------------------------------


async def current_people(conn: asyncpg.Connection, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, uuid.UUID]:
    """person id -> the id it was merged into (itself when not merged)."""
    rows = await conn.fetch(
        "SELECT id, COALESCE(merged_into, id) AS cur FROM people WHERE id = ANY($1::uuid[])", list(set(ids))
    )
    return {r["id"]: r["cur"] for r in rows}


async def people_named(conn: asyncpg.Connection, workspace: str, names: Iterable[str]) -> dict[str, list[uuid.UUID]]:
    """Normalized display name -> unmerged people carrying it."""
    lowered = sorted({n.lower() for n in names})
    if not lowered:
        return {}
    rows = await conn.fetch(
        "SELECT id, display_name FROM people WHERE workspace = $1 AND merged_into IS NULL"
        " AND lower(display_name) = ANY($2::text[]) ORDER BY id",
        workspace,
        lowered,
    )
    out: dict[str, list[uuid.UUID]] = {}
    for r in rows:
        out.setdefault(normalize_name(r["display_name"]), []).append(r["id"])
    return out


async def create_people(
    conn: asyncpg.Connection, workspace: str, rows: Sequence[tuple[uuid.UUID, str, str, str, bool]]
) -> None:
    """rows: (person_id, display_name, namespace, value, verified) — people and aliases, idempotent."""
    if not rows:
        return
    await conn.executemany(
        "INSERT INTO people (id, workspace, display_name) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING",
        [(pid, workspace, name) for pid, name, _, _, _ in rows],
    )
    await conn.executemany(
        "INSERT INTO person_aliases (workspace, namespace, value, person_id, verified, source_system)"
        " VALUES ($1, $2, $3, $4, $5, 'graph') ON CONFLICT DO NOTHING",
        [(workspace, ns, value, pid, verified) for pid, _, ns, value, verified in rows],
    )


async def add_alias_sources(
    conn: asyncpg.Connection, workspace: str, rows: Sequence[tuple[str, str, uuid.UUID]]
) -> None:
    """rows: (namespace, value, document id) — a document that carried an identity key is a source of its
    alias (migration 0011; reads apply the all-visible rule of ``services.sources``). Idempotent."""
    if not rows:
        return
    await conn.execute(
        "INSERT INTO person_alias_sources (workspace, namespace, value, document_id)"
        " SELECT DISTINCT $1, s.namespace, s.value, s.document_id"
        " FROM unnest($2::text[], $3::text[], $4::uuid[]) s(namespace, value, document_id)"
        " JOIN person_aliases a ON a.workspace = $1 AND a.namespace = s.namespace AND a.value = s.value"
        " JOIN documents d ON d.id = s.document_id ON CONFLICT DO NOTHING",
        workspace,
        [r[0] for r in rows],
        [r[1] for r in rows],
        [r[2] for r in rows],
    )


async def propose_merges(
    conn: asyncpg.Connection, workspace: str, rows: Sequence[tuple[uuid.UUID, uuid.UUID, str, float]]
) -> None:
    if rows:
        await conn.executemany(
            "INSERT INTO person_merge_proposals (workspace, person_a, person_b, reason, score)"
            " VALUES ($1, least($2::uuid, $3::uuid), greatest($2::uuid, $3::uuid), $4, $5) ON CONFLICT DO"
            " NOTHING",
            [(workspace, a, b, reason, score) for a, b, reason, score in rows if a != b],
        )


async def merge_person(
    conn: asyncpg.Connection,
    workspace: str,
    source: uuid.UUID,
    target: uuid.UUID,
    reason: str,
    exclusive: Sequence[str],
) -> None:
    """Fold ``source`` into ``target``: aliases, entity, facts, evidence; duplicate facts collapse."""
    await ensure_person_entities(conn, workspace, [target])
    await conn.execute("UPDATE people SET merged_into = $2, updated_at = now() WHERE id = $1", source, target)
    await conn.execute("UPDATE people SET merged_into = $2 WHERE merged_into = $1", source, target)
    await conn.execute("UPDATE person_aliases SET person_id = $2 WHERE person_id = $1", source, target)
    await conn.execute("UPDATE entities SET merged_into = $2, updated_at = now() WHERE id = $1", source, target)
    await conn.execute("UPDATE facts SET subject_id = $2 WHERE subject_id = $1", source, target)
    await conn.execute("UPDATE facts SET object_id = $2 WHERE object_id = $1", source, target)
    await conn.execute(
        "INSERT INTO entity_evidence (entity_id, document_id) SELECT $2, document_id FROM entity_evidence"
        " WHERE entity_id = $1 ON CONFLICT DO NOTHING",
        source,
        target,
    )
    await conn.execute("DELETE FROM entity_evidence WHERE entity_id = $1", source)
    await conn.execute(
        "INSERT INTO person_merges (workspace, source_id, target_id, reason) VALUES ($1, $2, $3, $4)"
        " ON CONFLICT (workspace, source_id) DO UPDATE SET target_id = EXCLUDED.target_id",
        workspace,
        source,
        target,
        reason,
    )
    await conn.execute(
        "UPDATE person_merge_proposals SET status = 'merged' WHERE workspace = $1"
        " AND person_a = least($2::uuid, $3::uuid) AND person_b = greatest($2::uuid, $3::uuid)",
        workspace,
        source,
        target,
    )
    await collapse_duplicates(conn, target, exclusive)


async def collapse_duplicates(conn: asyncpg.Connection, entity: uuid.UUID, exclusive: Sequence[str]) -> None:
    """Active facts of ``entity`` made identical by a merge keep the oldest row; the evidence moves."""
    rows = await conn.fetch(
        "WITH d AS (SELECT id, first_value(id) OVER (PARTITION BY subject_id, predicate, object_id,"
        " lower(value),"
        " CASE WHEN predicate = ANY($2::text[]) THEN valid_from END ORDER BY recorded_at, id) AS keep"
        " FROM facts WHERE (subject_id = $1 OR object_id = $1) AND invalidated_at IS NULL)"
        " SELECT id, keep FROM d WHERE id <> keep",
        entity,
        list(exclusive),
    )
    if not rows:
        return
    drop = [r["id"] for r in rows]
    await conn.execute(
        "INSERT INTO fact_evidence (fact_id, document_id, chunk_id, span_start, span_end, rule, confidence)"
        " SELECT m.keep, e.document_id, e.chunk_id, e.span_start, e.span_end, e.rule, e.confidence"
        " FROM fact_evidence e JOIN unnest($1::uuid[], $2::uuid[]) AS m(id, keep) ON m.id = e.fact_id"
        " ON CONFLICT DO NOTHING",
        drop,
        [r["keep"] for r in rows],
    )
    await conn.execute("DELETE FROM fact_evidence WHERE fact_id = ANY($1::uuid[])", drop)
    await conn.execute(
        "UPDATE facts SET invalidated_at = clock_timestamp(), status = 'merged' WHERE id = ANY($1::uuid[])",
        drop,
    )


# --- entities ----------------------------------------------------------------------------------


async def ensure_person_entities(conn: asyncpg.Connection, workspace: str, ids: Iterable[uuid.UUID]) -> None:
    await conn.execute(
        "INSERT INTO entities (id, workspace, type, name, norm_name)"
        " SELECT p.id, $1, 'person', COALESCE(p.display_name, p.primary_email, p.id::text),"
        " lower(COALESCE(p.display_name, p.primary_email, p.id::text))"
        " FROM people p WHERE p.id = ANY($2::uuid[]) ON CONFLICT (id) DO NOTHING",
        workspace,
        sorted(set(ids)),
    )


async def ensure_entities(
    conn: asyncpg.Connection, workspace: str, rows: Sequence[tuple[uuid.UUID, str, str, str]]
) -> None:
    """rows: (id, type, name, norm_name): entity rows and their name alias, idempotent."""
    if not rows:
        return
    ordered = sorted(set(rows))
    await conn.executemany(
        "INSERT INTO entities (id, workspace, type, name, norm_name) VALUES ($1, $2, $3, $4, $5)"
        " ON CONFLICT (id) DO NOTHING",
        [(i, workspace, t, n, norm) for i, t, n, norm in ordered],
    )
    await conn.executemany(
        "INSERT INTO entity_aliases (workspace, type, alias, entity_id) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        [(workspace, t, norm, i) for i, t, _, norm in ordered if norm],
    )


async def aliases(
    conn: asyncpg.Connection, workspace: str, keys: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], uuid.UUID]:
    sql = f"SELECT type, alias, entity_id FROM entity_aliases WHERE workspace = $1 AND (type, alias) {PAIR_IN}"
    return await ids_by_pair(conn, sql, workspace, keys)


async def replace_entity_evidence(
    conn: asyncpg.Connection, doc_ids: Sequence[uuid.UUID], rows: Sequence[tuple[uuid.UUID, uuid.UUID]]
) -> None:
    """Make ``rows`` (entity_id, document_id) the entity evidence of ``doc_ids``."""
    ents, docs = [r[0] for r in rows], [r[1] for r in rows]
    await conn.execute(
        "DELETE FROM entity_evidence x WHERE x.document_id = ANY($1::uuid[]) AND NOT EXISTS ("
        " SELECT 1 FROM unnest($2::uuid[], $3::uuid[]) AS k(e, d)"
        " WHERE k.e = x.entity_id AND k.d = x.document_id)",
        list(doc_ids),
        ents,
        docs,
    )
    if rows:
        await conn.execute(
            "INSERT INTO entity_evidence (entity_id, document_id) SELECT DISTINCT e, d"
            " FROM unnest($1::uuid[], $2::uuid[]) AS k(e, d) ON CONFLICT DO NOTHING",
            ents,
            docs,
        )


# --- facts -------------------------------------------------------------------------------------


async def slot_facts(
    conn: asyncpg.Connection, slots: Iterable[tuple[uuid.UUID, str]]
) -> tuple[dict[tuple[uuid.UUID, str], list[SlotFact]], dict[tuple[uuid.UUID, str, str, datetime], int]]:
    """Active facts per slot; invalidated row counts per (subject, predicate, target, valid_from)."""
    wanted = sorted(set(slots))
    active: dict[tuple[uuid.UUID, str], list[SlotFact]] = {s: [] for s in wanted}
    dead: dict[tuple[uuid.UUID, str, str, datetime], int] = {}
    if not wanted:
        return active, dead
    rows = await conn.fetch(
        "SELECT id, subject_id, predicate, object_id, value, valid_from, valid_to, closed_by, recorded_at,"
        " invalidated_at FROM facts WHERE (subject_id, predicate) IN"
        " (SELECT * FROM unnest($1::uuid[], $2::text[]))",
        [s[0] for s in wanted],
        [s[1] for s in wanted],
    )
    for r in rows:
        target = target_key(r["object_id"], r["value"])
        if r["invalidated_at"] is not None:
            k = (r["subject_id"], r["predicate"], target, r["valid_from"])
            dead[k] = dead.get(k, 0) + 1
            continue
        active[(r["subject_id"], r["predicate"])].append(
            SlotFact(r["id"], target, r["valid_from"], r["valid_to"], r["closed_by"], r["recorded_at"])
        )
    return active, dead


async def insert_facts(conn: asyncpg.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """rows: (id, workspace, subject_id, predicate, object_id, value, valid_from, time_grain, confidence,
    source)."""
    if rows:
        await conn.executemany(
            "INSERT INTO facts (id, workspace, subject_id, predicate, object_id, value, valid_from,"
            " time_grain,"
            " confidence, source, recorded_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10, clock_timestamp())"
            " ON CONFLICT (id) DO NOTHING",
            rows,
        )


async def replace_evidence(
    conn: asyncpg.Connection, doc_ids: Sequence[uuid.UUID], rows: Sequence[tuple[Any, ...]]
) -> list[uuid.UUID]:
    """Make ``rows`` the evidence of ``doc_ids``; returns facts that lost evidence.

    rows: (fact_id, document_id, chunk_id, span_start, span_end, rule, confidence).
    """
    if rows:
        await conn.executemany(
            "INSERT INTO fact_evidence (fact_id, document_id, chunk_id, span_start, span_end, rule,"
            " confidence)"
            " VALUES ($1,$2,$3,$4,$5,$6,$7) ON CONFLICT (fact_id, document_id, span_start, span_end) DO"
            " UPDATE"
            " SET chunk_id = EXCLUDED.chunk_id, rule = EXCLUDED.rule, confidence = EXCLUDED.confidence",
            rows,
        )
    lost = await conn.fetch(
        "DELETE FROM fact_evidence e WHERE e.document_id = ANY($1::uuid[]) AND NOT EXISTS ("
        " SELECT 1 FROM unnest($2::uuid[], $3::uuid[], $4::int[], $5::int[]) AS k(f, d, s, t)"
        " WHERE k.f = e.fact_id AND k.d = e.document_id AND k.s = e.span_start AND k.t = e.span_end)"
        " RETURNING e.fact_id",
        list(doc_ids),
        [r[0] for r in rows],
        [r[1] for r in rows],
        [r[3] for r in rows],
        [r[4] for r in rows],
    )
    touched = sorted({r[0] for r in rows})
    if touched:
        await conn.execute(
            "UPDATE facts f SET confidence = m.c FROM (SELECT fact_id, max(confidence) AS c FROM"
            " fact_evidence"
            " WHERE fact_id = ANY($1::uuid[]) GROUP BY fact_id) m WHERE f.id = m.fact_id AND f.confidence <>"
            " m.c",
            touched,
        )
    return sorted({r["fact_id"] for r in lost})


async def retract_unevidenced(conn: asyncpg.Connection, fact_ids: Sequence[uuid.UUID]) -> list[tuple[uuid.UUID, str]]:
    """Facts left without evidence are retracted (belief time closes); returns their slots."""
    if not fact_ids:
        return []
    rows = await conn.fetch(
        "UPDATE facts f SET invalidated_at = clock_timestamp(), status = 'retracted'"
        " WHERE f.id = ANY($1::uuid[]) AND f.invalidated_at IS NULL"
        " AND NOT EXISTS (SELECT 1 FROM fact_evidence e WHERE e.fact_id = f.id)"
        " RETURNING subject_id, predicate",
        list(fact_ids),
    )
    return [(r["subject_id"], r["predicate"]) for r in rows]


async def apply_slot_updates(conn: asyncpg.Connection, updates: Sequence[SlotUpdate]) -> None:
    if updates:
        await conn.executemany(
            "UPDATE facts SET valid_to = $2, closed_by = $3, status = $4,"
            " invalidated_at = CASE WHEN $5 THEN clock_timestamp() ELSE invalidated_at END WHERE id = $1",
            [(u.fact_id, u.valid_to, u.closed_by, u.status, u.invalidate) for u in updates],
        )
