"""Rows of passage search: visible chunks with their document fields, author resolution and the retrieval audit."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from retriever.access import decayed_weight_sql
from retriever.scope import SearchScope, Where, scope_where
from services.sources import alias_visible_sql


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """A visible child chunk with its document fields and its parent's readable text."""

    chunk_id: str
    document_id: str
    content_hash: str
    title: str | None
    text: str
    parent_text: str | None
    event_time: datetime
    principals: tuple[str, ...]
    access_count: float
    """Decayed usage (``retriever/access.py``), not the plain total."""
    kind: str
    source_system: str
    external_id: str
    url: str | None


async def fetch_chunks(conn: asyncpg.Connection, scope: SearchScope, ids: Sequence[str]) -> dict[str, ChunkRow]:
    """Rows for ``ids`` that are still visible under ``scope`` (ACL re-checked; filters re-applied)."""
    if scope.matches_nothing or not ids:
        return {}
    w = Where()
    id_arg = w.arg([uuid.UUID(i) for i in ids], "::uuid[]")
    scope_where(scope, "c", w)
    rows = await conn.fetch(
        "SELECT c.id, c.document_id, c.content_hash, c.title, c.text, p.text AS parent_text, c.event_time,"
        f" c.principals, {decayed_weight_sql()} AS access_count, c.kind, c.source_system, d.external_id, d.url"
        " FROM chunks c JOIN documents d ON d.id = c.document_id LEFT JOIN chunks p ON p.id = c.parent_id"
        f" WHERE c.id = ANY({id_arg}) AND {w.sql()}",
        *w.params,
    )
    return {
        str(r["id"]): ChunkRow(
            chunk_id=str(r["id"]),
            document_id=str(r["document_id"]),
            content_hash=r["content_hash"],
            title=r["title"],
            text=r["text"],
            parent_text=r["parent_text"],
            event_time=r["event_time"],
            principals=tuple(r["principals"]),
            access_count=r["access_count"],
            kind=r["kind"],
            source_system=r["source_system"],
            external_id=r["external_id"],
            url=r["url"],
        )
        for r in rows
    }


async def resolve_author(
    conn: asyncpg.Connection, workspace: str, author: str, viewer: Sequence[str]
) -> tuple[uuid.UUID, ...]:
    """Author filter value -> person ids: a uuid is taken as is, an email is looked up in the aliases the
    viewer may resolve (all-visible over the alias's source documents, ``services.sources``): an email learnt
    only from a document the viewer cannot see resolves to nobody, as an unknown one does."""
    try:
        return (uuid.UUID(author),)
    except ValueError:
        pass
    if not viewer:
        return ()
    rows = await conn.fetch(
        "SELECT a.person_id, p.merged_into FROM person_aliases a JOIN people p ON p.id = a.person_id"
        f" WHERE a.workspace = $1 AND a.namespace = 'email' AND a.value = $2 AND {alias_visible_sql('$3')}",
        workspace,
        author.strip().lower(),
        list(viewer),
    )
    ids = {r["person_id"] for r in rows} | {r["merged_into"] for r in rows if r["merged_into"]}
    return tuple(sorted(ids))


async def per_chunk(
    conn: asyncpg.Connection, chunk_ids: Sequence[str], value_sql: str, joins: str = ""
) -> dict[str, str]:
    """``value_sql`` (over ``c`` = chunks, ``d`` = documents and ``joins``) for each of ``chunk_ids`` (chunks already
    fetched under the viewer's scope), where it is not null."""
    if not chunk_ids:
        return {}
    rows = await conn.fetch(
        f"SELECT c.id, {value_sql} AS v FROM chunks c JOIN documents d ON d.id = c.document_id {joins}"
        f" WHERE c.id = ANY($1::uuid[]) AND {value_sql} IS NOT NULL",
        [uuid.UUID(i) for i in chunk_ids],
    )
    return {str(r["id"]): str(r["v"]) for r in rows}


async def write_audit(
    conn: asyncpg.Connection,
    *,
    workspace: str,
    viewer: str | None,
    tool: str,
    query_hash: str,
    returned_ids: Sequence[str],
    latency_ms: float,
    diagnostics: str | None,
    returned_documents: Sequence[uuid.UUID] = (),
) -> None:
    await conn.execute(
        "INSERT INTO retrieval_audit (workspace, viewer, tool, query_hash, returned_ids, latency_ms,"
        " diagnostics, returned_documents) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::uuid[])",
        workspace,
        viewer,
        tool,
        query_hash,
        list(returned_ids),
        latency_ms,
        diagnostics,
        list(dict.fromkeys(returned_documents)),
    )
