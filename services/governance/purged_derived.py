"""Retention of derived data: a purge removes every row derived from the purged documents whose last
source is gone, and rewrites the rows that keep other sources (the rule of ``services.sources``).

- identity aliases (``person_aliases``): the purged documents leave ``person_alias_sources``; an alias with
  no source left is deleted (and a person's ``primary_email`` that was that alias is cleared);
- taxonomy proposals: the purged documents leave ``evidence``; a proposal with no evidence left is deleted
  with its delivery log; the host's value and user id of the affected subjects are recomputed;
- cached Worldbuilder profiles that cite a purged document, or of a person who lost an alias, are dropped.

Facts are handled by the purge itself (``retention._purge_rows``: a fact left without evidence is deleted).
Runs inside the purge transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

import asyncpg

from services.taxonomy import proposals

Subject = tuple[str, uuid.UUID]


async def purge_derived(
    conn: asyncpg.Connection, ids: Sequence[uuid.UUID], fact_subjects: Iterable[Subject]
) -> set[Subject]:
    """Remove / rewrite what ``ids`` derived; returns the subjects whose host values must be recomputed."""
    subjects = set(fact_subjects)
    keys = await conn.fetch(
        "DELETE FROM person_alias_sources WHERE document_id = ANY($1::uuid[]) RETURNING workspace, namespace, value",
        list(ids),
    )
    wanted = sorted({(r["workspace"], r["namespace"], r["value"]) for r in keys})
    gone = await conn.fetch(
        "DELETE FROM person_aliases a"
        " USING unnest($1::text[], $2::text[], $3::text[]) AS k(workspace, namespace, value)"
        " WHERE a.workspace = k.workspace AND a.namespace = k.namespace AND a.value = k.value"
        " AND NOT EXISTS (SELECT 1 FROM person_alias_sources s WHERE s.workspace = a.workspace"
        " AND s.namespace = a.namespace AND s.value = a.value)"
        " RETURNING a.workspace, a.namespace, a.value, a.person_id",
        [k[0] for k in wanted],
        [k[1] for k in wanted],
        [k[2] for k in wanted],
    )
    persons = sorted({r["person_id"] for r in gone}, key=str)
    emails = [(r["person_id"], r["value"]) for r in gone if r["namespace"] == "email"]
    if emails:
        await conn.execute(
            "UPDATE people p SET primary_email = NULL, updated_at = now()"
            " FROM unnest($1::uuid[], $2::text[]) AS k(id, email)"
            " WHERE p.id = k.id AND lower(p.primary_email) = k.email",
            [e[0] for e in emails],
            [e[1] for e in emails],
        )
    if persons:
        rows = await conn.fetch(
            "SELECT DISTINCT workspace, COALESCE(merged_into, id) AS id FROM people WHERE id = ANY($1::uuid[])",
            persons,
        )
        subjects |= {(r["workspace"], r["id"]) for r in rows}
    touched = await conn.fetch(
        "UPDATE taxonomy_proposals"
        " SET evidence = ARRAY(SELECT e FROM unnest(evidence) e WHERE NOT e = ANY($1::uuid[])), updated_at = now()"
        " WHERE evidence && $1::uuid[] RETURNING id, workspace, subject_id, cardinality(evidence) AS n",
        list(ids),
    )
    empty = [r["id"] for r in touched if r["n"] == 0]
    if empty:
        await conn.execute("DELETE FROM taxonomy_proposal_deliveries WHERE proposal_id = ANY($1::uuid[])", empty)
        await conn.execute("DELETE FROM taxonomy_proposals WHERE id = ANY($1::uuid[])", empty)
    subjects |= {(r["workspace"], r["subject_id"]) for r in touched if r["n"] > 0}
    await conn.execute(
        "DELETE FROM worldbuilder_profiles w WHERE w.entity_id = ANY($2::uuid[])"
        " OR EXISTS (SELECT 1 FROM unnest($1::uuid[]) i WHERE strpos(w.profile::text, i::text) > 0)",
        list(ids),
        [*persons, *(s[1] for s in subjects)],
    )
    return subjects


async def refresh_host_values(conn: asyncpg.Connection, subjects: Iterable[Subject]) -> None:
    """Recompute the stored host value and host user id of the subjects' proposals (after the purge removed
    the facts and aliases they were read from)."""
    for workspace, subject in sorted(set(subjects), key=str):
        rows = await conn.fetch(
            "SELECT id, slot, predicate FROM taxonomy_proposals WHERE workspace = $1 AND subject_id = $2",
            workspace,
            subject,
        )
        if not rows:
            continue
        host_entity = await conn.fetchval(
            "SELECT a.value FROM person_aliases a JOIN people p ON p.id = a.person_id WHERE a.workspace = $1"
            " AND a.namespace = 'platform_user' AND COALESCE(p.merged_into, p.id) = $2 ORDER BY a.value LIMIT 1",
            workspace,
            subject,
        )
        for r in rows:
            host = await proposals.host_values(conn, workspace, subject, r["slot"], r["predicate"])
            await conn.execute(
                "UPDATE taxonomy_proposals SET host_value = $2, host_entity_id = $3 WHERE id = $1",
                r["id"],
                ", ".join(host) or None,
                host_entity,
            )
