"""Person resolution on the write path: identity keys (email, verified platform ids) -> person ids.

Exact keys only. A key seen for the first time creates a person; all keys of one author/participant
are attached to the person its first known key resolves to. Merging two existing people is the
conflicts stage's job (verified keys only; names never merge on their own).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from schemas.envelope import Person
from services.db.pairs import PAIR_IN, ids_by_pair
from services.ids import person_id


@dataclass(frozen=True, slots=True)
class PersonInput:
    display_name: str | None
    email: str | None
    keys: tuple[tuple[str, str, bool], ...]  # (namespace, value, verified)


def person_input(p: Person) -> PersonInput | None:
    keys: list[tuple[str, str, bool]] = []
    if p.email:
        keys.append(("email", p.email.lower(), False))
    keys.extend((i.namespace, i.value, i.verified) for i in p.identities)
    if not keys:
        return None
    return PersonInput(p.display_name, p.email, tuple(keys))


async def resolve_people(
    conn: asyncpg.Connection, workspace: str, people: Sequence[PersonInput], source_system: str
) -> list[uuid.UUID]:
    """Return a person id per input (same order), creating people and aliases as needed."""
    if not people:
        return []
    sql = (
        f"SELECT namespace, value, person_id FROM person_aliases WHERE workspace = $1 AND (namespace, value) {PAIR_IN}"
    )
    known = await ids_by_pair(conn, sql, workspace, ((ns, v) for p in people for ns, v, _ in p.keys))
    result: list[uuid.UUID] = []
    new_people: dict[uuid.UUID, PersonInput] = {}
    new_aliases: list[tuple[str, str, str, uuid.UUID, bool, str]] = []
    for p in people:
        pid = next((known[(ns, v)] for ns, v, _ in p.keys if (ns, v) in known), None)
        if pid is None:
            ns, v, _ = p.keys[0]
            pid = person_id(workspace, ns, v)
            new_people.setdefault(pid, p)
        for ns, v, verified in p.keys:
            if (ns, v) not in known:
                known[(ns, v)] = pid
                new_aliases.append((workspace, ns, v, pid, verified, source_system))
        result.append(pid)
    if new_people:
        await conn.executemany(
            "INSERT INTO people (id, workspace, display_name, primary_email) VALUES ($1, $2, $3, $4)"
            " ON CONFLICT (id) DO UPDATE SET display_name = COALESCE(people.display_name, EXCLUDED.display_name),"
            " primary_email = COALESCE(people.primary_email, EXCLUDED.primary_email)",
            [(pid, workspace, p.display_name, p.email) for pid, p in new_people.items()],
        )
    if new_aliases:
        await conn.executemany(
            "INSERT INTO person_aliases (workspace, namespace, value, person_id, verified, source_system)"
            " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
            new_aliases,
        )
    return result


async def replace_alias_sources(
    conn: asyncpg.Connection, documents: Sequence[uuid.UUID], rows: Sequence[tuple[str, str, str, uuid.UUID]]
) -> None:
    """The identity keys each of ``documents`` carries now (rows: workspace, namespace, value, document id):
    the sources of those aliases (migration 0011). Replaced per version, like participants."""
    if not documents:
        return
    await conn.execute("DELETE FROM person_alias_sources WHERE document_id = ANY($1::uuid[])", list(documents))
    if rows:
        await conn.execute(
            "INSERT INTO person_alias_sources (workspace, namespace, value, document_id)"
            " SELECT DISTINCT s.* FROM unnest($1::text[], $2::text[], $3::text[], $4::uuid[])"
            " AS s(workspace, namespace, value, document_id)"
            " JOIN person_aliases a USING (workspace, namespace, value) ON CONFLICT DO NOTHING",
            [r[0] for r in rows],
            [r[1] for r in rows],
            [r[2] for r in rows],
            [r[3] for r in rows],
        )
