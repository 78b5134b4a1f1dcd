"""SQL of the ingest stage (asyncpg). ACL and tombstones are denormalised onto chunks here."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg

from ingest.apply import DocState
from services.chunk_embedding import cache_hit
from services.db import processed

STAGE = "ingest"
DOC_COLUMNS = (
    "id, workspace, source_system, external_id, kind, title, url, thread_external_id, parent_external_id,"
    " author_person_id, event_time, deleted_at, current_version, content_hash, principals, acl_event_time,"
    " blob_key, structured_fields::text AS structured_fields, author_name"
)


async def load_states(conn: asyncpg.Connection, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, DocState]:
    rows = await conn.fetch(
        f"SELECT {DOC_COLUMNS} FROM documents WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE", list(ids)
    )
    out: dict[uuid.UUID, DocState] = {}
    for r in rows:
        fields: dict[str, Any] = {k: (tuple(v) if k == "principals" else v) for k, v in dict(r).items()}
        out[r["id"]] = DocState(**fields)
    return out


def _principals_text(principals: Sequence[str]) -> str:
    """A principal list as one ``unnest`` element (``string_to_array(x, ',')`` in SQL): principals are
    ``user:<uuid>`` / ``group:<uuid>`` (``schemas.envelope.PRINCIPAL_RE``), never a comma."""
    return ",".join(principals)


async def save_states(conn: asyncpg.Connection, states: Sequence[DocState]) -> None:
    """Upsert the documents' rows: one statement for the batch (ids are unique in ``states``)."""
    if not states:
        return
    await conn.execute(
        "INSERT INTO documents (id, workspace, source_system, external_id, kind, title, url, thread_external_id,"
        " parent_external_id, author_person_id, event_time, deleted_at, current_version, content_hash,"
        " principals, acl_event_time, blob_key, structured_fields, author_name)"
        " SELECT id, workspace, source_system, external_id, kind, title, url, thread_external_id,"
        " parent_external_id, author_person_id, event_time, deleted_at, current_version, content_hash,"
        " string_to_array(principals, ','), acl_event_time, blob_key, structured_fields::jsonb, author_name"
        " FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],"
        " $8::text[], $9::text[], $10::uuid[], $11::timestamptz[], $12::timestamptz[], $13::int[], $14::text[],"
        " $15::text[], $16::timestamptz[], $17::text[], $18::text[], $19::text[])"
        " AS s(id, workspace, source_system, external_id, kind, title, url, thread_external_id, parent_external_id,"
        " author_person_id, event_time, deleted_at, current_version, content_hash, principals, acl_event_time,"
        " blob_key, structured_fields, author_name)"
        " ON CONFLICT (id) DO UPDATE SET kind = EXCLUDED.kind, title = EXCLUDED.title, url = EXCLUDED.url,"
        " thread_external_id = EXCLUDED.thread_external_id, parent_external_id = EXCLUDED.parent_external_id,"
        " author_person_id = EXCLUDED.author_person_id, author_name = EXCLUDED.author_name,"
        " event_time = EXCLUDED.event_time,"
        " deleted_at = EXCLUDED.deleted_at, current_version = EXCLUDED.current_version,"
        " content_hash = EXCLUDED.content_hash, principals = EXCLUDED.principals,"
        " acl_event_time = EXCLUDED.acl_event_time, blob_key = EXCLUDED.blob_key,"
        " structured_fields = EXCLUDED.structured_fields, updated_at = now()",
        [s.id for s in states],
        [s.workspace for s in states],
        [s.source_system for s in states],
        [s.external_id for s in states],
        [s.kind for s in states],
        [s.title for s in states],
        [s.url for s in states],
        [s.thread_external_id for s in states],
        [s.parent_external_id for s in states],
        [s.author_person_id for s in states],
        [s.event_time for s in states],
        [s.deleted_at for s in states],
        [s.current_version for s in states],
        [s.content_hash for s in states],
        [_principals_text(s.principals) for s in states],
        [s.acl_event_time for s in states],
        [s.blob_key for s in states],
        [s.structured_fields for s in states],
        [s.author_name for s in states],
    )


async def insert_versions(conn: asyncpg.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """rows: (document_id, version, envelope_id, op, event_time, content_hash, blob_key)."""
    if rows:
        cols = list(zip(*rows, strict=True))
        await conn.execute(
            "INSERT INTO document_versions (document_id, version, envelope_id, op, event_time, content_hash,"
            " blob_key) SELECT * FROM unnest($1::uuid[], $2::int[], $3::uuid[], $4::text[], $5::timestamptz[],"
            " $6::text[], $7::text[]) ON CONFLICT DO NOTHING",
            *(list(c) for c in cols),
        )


CHUNK_TSV = (
    "setweight(to_tsvector('english', coalesce({title}, '')), 'A')"
    " || to_tsvector('english', coalesce({context}, '')) || to_tsvector('english', {text})"
)
"""A child chunk's ``tsv``: title (weight A), index context (``ingest/context.py``), text."""


async def replace_chunks(
    conn: asyncpg.Connection, doc_ids: Sequence[uuid.UUID], rows: Sequence[tuple[Any, ...]], model: str
) -> set[uuid.UUID]:
    """Drop the documents' chunks and insert ``rows`` (current version only) in one statement; workspace,
    principals, event time, source, kind and author come from the document rows just saved, and a
    child whose embedded text is in the embedding cache under ``model`` gets its vector in the same insert.
    Returns the ids of the children that got a cached vector.

    row: (id, document_id, parent_id, is_parent, ordinal, char_start, char_end, text, content_hash, index_context,
    title) — the title is the document's ``DocState.index_title``
    """
    if doc_ids:
        await conn.execute("DELETE FROM chunks WHERE document_id = ANY($1::uuid[])", list(doc_ids))
    if not rows:
        return set()
    cols = list(zip(*rows, strict=True))
    tsv = CHUNK_TSV.format(title="u.title", context="u.index_context", text="u.text")
    carried = await conn.fetch(
        "WITH ins AS (INSERT INTO chunks (id, document_id, workspace, parent_id, is_parent, ordinal, char_start,"
        " char_end, text, title, content_hash, principals, event_time, source_system, kind, author_person_id,"
        " index_context, tsv, embedding, embedding_model)"
        " SELECT u.id, u.document_id, d.workspace, u.parent_id, u.is_parent, u.ordinal, u.char_start,"
        " u.char_end, u.text, u.title, u.content_hash, d.principals, d.event_time, d.source_system, d.kind,"
        f" d.author_person_id, u.index_context, CASE WHEN u.is_parent THEN NULL ELSE {tsv} END,"
        " ec.embedding, ec.embedding_model"
        " FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::bool[], $5::int[], $6::int[], $7::int[],"
        " $8::text[], $9::text[], $10::text[], $11::text[]) AS u(id, document_id, parent_id, is_parent, ordinal,"
        " char_start, char_end, text, content_hash, index_context, title)"
        " JOIN documents d ON d.id = u.document_id"
        f" LEFT JOIN embedding_cache ec ON NOT u.is_parent AND {cache_hit('u', '$12')}"
        " RETURNING id, embedding_model) SELECT id FROM ins WHERE embedding_model IS NOT NULL",
        *(list(c) for c in cols),
        model,
    )
    return {r["id"] for r in carried}


async def sync_chunk_access(conn: asyncpg.Connection, states: Sequence[DocState]) -> None:
    """Denormalise principals and tombstones from the documents' rows (just saved) onto their chunks."""
    if states:  # driven by chunks_document (an unanalysed table would otherwise be scanned whole)
        await conn.execute(
            "UPDATE chunks c SET principals = d.principals, deleted = d.deleted_at IS NOT NULL FROM documents d"
            " WHERE c.document_id = ANY($1::uuid[]) AND d.id = c.document_id"
            " AND (c.principals IS DISTINCT FROM d.principals OR c.deleted <> (d.deleted_at IS NOT NULL))",
            [s.id for s in states],
        )


async def replace_participants(
    conn: asyncpg.Connection, doc_ids: Sequence[uuid.UUID], rows: Sequence[tuple[uuid.UUID, uuid.UUID, str]]
) -> None:
    if doc_ids:
        await conn.execute("DELETE FROM participants WHERE document_id = ANY($1::uuid[])", list(doc_ids))
    if rows:
        unique = list(dict.fromkeys(rows))
        await conn.execute(
            "INSERT INTO participants (document_id, person_id, role)"
            " SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[]) ON CONFLICT DO NOTHING",
            [r[0] for r in unique],
            [r[1] for r in unique],
            [r[2] for r in unique],
        )


async def participant_ids(conn: asyncpg.Connection, doc_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[uuid.UUID]]:
    rows = await conn.fetch(
        "SELECT document_id, person_id FROM participants WHERE document_id = ANY($1::uuid[])"
        " ORDER BY document_id, person_id",
        list(doc_ids),
    )
    out: dict[uuid.UUID, list[uuid.UUID]] = {}
    for r in rows:
        out.setdefault(r["document_id"], []).append(r["person_id"])
    return out


async def claim_events(conn: asyncpg.Connection, keys: Sequence[str]) -> set[str]:
    """This stage's processed-event claim (``services.db.processed``)."""
    return await processed.claim_events(conn, STAGE, keys)
