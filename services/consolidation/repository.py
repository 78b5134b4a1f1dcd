"""SQL of consolidation (migration 0013_consolidation): load an owner's memories, apply a merge, undo it, list
merges under the all-visible rule. A merge hides the absorbed memories' live chunks from the survivor's time on
(``memory_hidden``; every arm's scope filters on it, so they stop ranking for a query about the present and still
rank for a query as of an earlier time) and leaves documents, versions, chunks and text untouched: the memories
stay stored and readable by their viewers, and undo deletes the merge's ``memory_hidden`` rows."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np

from services.consolidation.rules import Memory, Merge
from services.sources import all_visible_sql, array_sources

# Memories that are candidates: live, of the given source systems, not absorbed by an active merge.
_CANDIDATES = """
SELECT d.id, d.author_person_id, d.principals, d.event_time, d.current_version,
       coalesce(
         (SELECT string_agg(c.text, ' ' ORDER BY c.ordinal) FROM chunks c
           WHERE c.document_id = d.id AND c.is_parent AND NOT c.deleted),
         (SELECT string_agg(c.text, ' ' ORDER BY c.ordinal) FROM chunks c
           WHERE c.document_id = d.id AND NOT c.is_parent AND NOT c.deleted)) AS text,
       (SELECT avg(c.embedding) FROM chunks c
         WHERE c.document_id = d.id AND NOT c.is_parent AND NOT c.deleted AND c.embedding IS NOT NULL) AS vector
  FROM documents d
 WHERE d.workspace = $1 AND d.source_system = ANY($2::text[]) AND d.deleted_at IS NULL
   AND NOT EXISTS (SELECT 1 FROM memory_consolidations m
                    WHERE m.undone_at IS NULL AND d.id = ANY(m.absorbed_ids))
"""

# A viewer sees a merge only when it sees every document the merge came from (the derived-data rule).
_VISIBLE = all_visible_sql(array_sources("m.source_document_ids"), "$2")


@dataclass(frozen=True, slots=True)
class Owner:
    """Memories merge only within one owner: same author and exactly the same ACL (a merge never widens access)."""

    author_person_id: uuid.UUID | None
    principals: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Loaded:
    memories: dict[Owner, list[Memory]]
    versions: dict[str, int]
    event_times: dict[str, datetime]


async def load(conn: asyncpg.Connection, workspace: str, source_systems: Sequence[str]) -> Loaded:
    rows = await conn.fetch(_CANDIDATES, workspace, list(source_systems))
    groups: dict[Owner, list[Memory]] = {}
    versions: dict[str, int] = {}
    times: dict[str, datetime] = {}
    for r in rows:
        if not r["text"]:
            continue
        raw = r["vector"]
        vec = None if raw is None else np.asarray(raw.to_list() if hasattr(raw, "to_list") else raw, dtype=np.float32)
        owner = Owner(r["author_person_id"], tuple(sorted(r["principals"])))
        groups.setdefault(owner, []).append(Memory(str(r["id"]), r["text"], r["event_time"], vec))
        versions[str(r["id"])] = r["current_version"]
        times[str(r["id"])] = r["event_time"]
    return Loaded(groups, versions, times)


async def _close_facts(conn: asyncpg.Connection, absorbed: list[uuid.UUID], until: datetime) -> list[dict[str, Any]]:
    """Contradiction through the bi-temporal graph: an open fact resting only on superseded statements gets
    ``valid_to`` = the newer statement's time (or, when that is not after its start, ``invalidated_at``)."""
    rows = await conn.fetch(
        """
        SELECT f.id, f.valid_from, f.valid_to, f.invalidated_at FROM facts f
         WHERE f.valid_to IS NULL AND f.invalidated_at IS NULL
           AND EXISTS (SELECT 1 FROM fact_evidence e WHERE e.fact_id = f.id AND e.document_id = ANY($1::uuid[]))
           AND NOT EXISTS (SELECT 1 FROM fact_evidence e JOIN documents d ON d.id = e.document_id
                            WHERE e.fact_id = f.id AND d.deleted_at IS NULL AND NOT (e.document_id = ANY($1::uuid[])))
        """,
        absorbed,
    )
    changes: list[dict[str, Any]] = []
    for r in rows:
        if until > r["valid_from"]:
            await conn.execute("UPDATE facts SET valid_to = $2 WHERE id = $1", r["id"], until)
            changes.append({"fact_id": str(r["id"]), "set": "valid_to", "value": until.isoformat()})
        else:
            await conn.execute("UPDATE facts SET invalidated_at = now() WHERE id = $1", r["id"])
            changes.append({"fact_id": str(r["id"]), "set": "invalidated_at", "value": None})
    return changes


async def apply(
    conn: asyncpg.Connection, workspace: str, run_id: uuid.UUID, merge: Merge, loaded: Loaded, actor: str
) -> uuid.UUID | None:
    """Record and apply one merge in the caller's transaction; None when a memory changed since it was loaded."""
    ids = [uuid.UUID(d) for d in merge.absorbed]
    survivor = uuid.UUID(merge.survivor)
    current = await conn.fetch(
        "SELECT id, current_version FROM documents WHERE id = ANY($1::uuid[]) AND deleted_at IS NULL FOR UPDATE",
        [*ids, survivor],
    )
    if {str(r["id"]): r["current_version"] for r in current} != {
        d: loaded.versions[d] for d in (*merge.absorbed, merge.survivor)
    }:
        return None
    facts: list[dict[str, Any]] = []
    if merge.reason == "contradiction":
        facts = await _close_facts(conn, ids, loaded.event_times[merge.survivor])
    cid = uuid.uuid4()
    await conn.execute(
        """INSERT INTO memory_consolidations (id, workspace, run_id, survivor_id, absorbed_ids, absorbed_versions,
               source_document_ids, reason, similarity, hidden_chunks, fact_changes, created_by)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12)""",
        cid,
        workspace,
        run_id,
        survivor,
        ids,
        [loaded.versions[d] for d in merge.absorbed],
        [survivor, *ids],
        merge.reason,
        merge.similarity,
        [],
        json.dumps(facts),
        actor,
    )
    hidden = await conn.fetch(
        "INSERT INTO memory_hidden (chunk_id, document_id, consolidation_id, hidden_from)"
        " SELECT c.id, c.document_id, $2, $3 FROM chunks c WHERE c.document_id = ANY($1::uuid[]) AND NOT c.deleted"
        " ON CONFLICT (chunk_id) DO NOTHING RETURNING chunk_id",
        ids,
        cid,
        loaded.event_times[merge.survivor],
    )
    await conn.execute(
        "UPDATE memory_consolidations SET hidden_chunks = $2 WHERE id = $1", cid, [r["chunk_id"] for r in hidden]
    )
    return cid


async def undo(conn: asyncpg.Connection, cid: uuid.UUID, actor: str) -> dict[str, Any] | None:
    """Put back exactly what ``apply`` changed, in the caller's transaction. Memories edited or forgotten since
    the merge are left as they are now (listed in ``skipped``); None when there is no active merge ``cid``."""
    row = await conn.fetchrow("SELECT * FROM memory_consolidations WHERE id = $1 AND undone_at IS NULL FOR UPDATE", cid)
    if row is None:
        return None
    now_versions = {
        r["id"]: r["current_version"]
        for r in await conn.fetch(
            "SELECT id, current_version FROM documents WHERE id = ANY($1::uuid[]) AND deleted_at IS NULL",
            row["absorbed_ids"],
        )
    }
    unchanged = [
        d for d, v in zip(row["absorbed_ids"], row["absorbed_versions"], strict=True) if now_versions.get(d) == v
    ]
    restored = await conn.execute("DELETE FROM memory_hidden WHERE consolidation_id = $1", cid)
    for change in json.loads(row["fact_changes"]):
        if change["set"] == "valid_to":
            await conn.execute(
                "UPDATE facts SET valid_to = NULL WHERE id = $1 AND valid_to = $2",
                uuid.UUID(change["fact_id"]),
                datetime.fromisoformat(change["value"]),
            )
        else:
            await conn.execute("UPDATE facts SET invalidated_at = NULL WHERE id = $1", uuid.UUID(change["fact_id"]))
    await conn.execute("UPDATE memory_consolidations SET undone_at = now(), undone_by = $2 WHERE id = $1", cid, actor)
    return {
        "restored_chunks": int(restored.rsplit(" ", 1)[-1]),
        "skipped": [str(d) for d in row["absorbed_ids"] if d not in set(unchanged)],
    }


async def visible(conn: asyncpg.Connection, cid: uuid.UUID, principals: Sequence[str]) -> bool:
    found = await conn.fetchval(
        f"SELECT true FROM memory_consolidations m WHERE m.id = $1 AND {_VISIBLE}", cid, list(principals)
    )
    return bool(found)


async def listing(
    conn: asyncpg.Connection, workspace: str, principals: Sequence[str] | None, *, limit: int, before: datetime | None
) -> list[asyncpg.Record]:
    """Newest first; ``principals`` None (an admin) sees every merge, otherwise only all-visible ones."""
    where = "m.workspace = $1" + ("" if principals is None else f" AND {_VISIBLE}")
    args: list[Any] = [workspace] if principals is None else [workspace, list(principals)]
    args.append(before)
    args.append(limit)
    n = len(args)
    return list(
        await conn.fetch(
            f"""SELECT m.* FROM memory_consolidations m
                 WHERE {where} AND (${n - 1}::timestamptz IS NULL OR m.created_at < ${n - 1})
                 ORDER BY m.created_at DESC, m.id LIMIT ${n}""",
            *args,
        )
    )


async def author_principals(conn: asyncpg.Connection, document_id: uuid.UUID) -> set[str]:
    """The verified principals of a memory's author (``person_aliases`` namespace ``principal``)."""
    rows = await conn.fetch(
        "SELECT a.value FROM documents d JOIN person_aliases a ON a.person_id = d.author_person_id"
        " AND a.workspace = d.workspace AND a.namespace = 'principal' WHERE d.id = $1",
        document_id,
    )
    return {r["value"] for r in rows}
