"""SQL of the ingest stage (asyncpg). ACL and tombstones are denormalised onto chunks here."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg

from ingest.apply import DocState
from services.db import processed

STAGE = "ingest"
DOC_COLUMNS = (
    "id, workspace, source_system, external_id, kind, title, url, thread_external_id, parent_external_id,"
    " author_person_id, event_time, deleted_at, current_version, content_hash, principals, acl_event_time,"
    " blob_key, structured_fields::text AS structured_fields"
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


async def save_states(conn: asyncpg.Connection, states: Sequence[DocState]) -> None:
    await conn.executemany(
        "INSERT INTO documents (id, workspace, source_system, external_id, kind, title, url, thread_external_id,"
        " parent_external_id, author_person_id, event_time, deleted_at, current_version, content_hash,"
        " principals, acl_event_time, blob_key, structured_fields)"
        " VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18::jsonb)"
        " ON CONFLICT (id) DO UPDATE SET kind = EXCLUDED.kind, title = EXCLUDED.title, url = EXCLUDED.url,"
        " thread_external_id = EXCLUDED.thread_external_id, parent_external_id = EXCLUDED.parent_external_id,"
        " author_person_id = EXCLUDED.author_person_id, event_time = EXCLUDED.event_time,"
        " deleted_at = EXCLUDED.deleted_at, current_version = EXCLUDED.current_version,"
        " content_hash = EXCLUDED.content_hash, principals = EXCLUDED.principals,"
        " acl_event_time = EXCLUDED.acl_event_time, blob_key = EXCLUDED.blob_key,"
        " structured_fields = EXCLUDED.structured_fields, updated_at = now()",
        [
            (
                s.id,
                s.workspace,
                s.source_system,
                s.external_id,
                s.kind,
                s.title,
                s.url,
                s.thread_external_id,
                s.parent_external_id,
                s.author_person_id,
                s.event_time,
                s.deleted_at,
                s.current_version,
                s.content_hash,
                list(s.principals),
                s.acl_event_time,
                s.blob_key,
                s.structured_fields,
            )
            for s in states
        ],
    )


async def insert_versions(conn: asyncpg.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """rows: (document_id, version, envelope_id, op, event_time, content_hash, blob_key)."""
    if rows:
        await conn.executemany(
            "INSERT INTO document_versions (document_id, version, envelope_id, op, event_time, content_hash,"
            " blob_key) VALUES ($1,$2,$3,$4,$5,$6,$7) ON CONFLICT DO NOTHING",
            rows,
        )


async def replace_chunks(
    conn: asyncpg.Connection, doc_ids: Sequence[uuid.UUID], rows: Sequence[tuple[Any, ...]]
) -> None:
    """Drop the documents' chunks and insert ``rows`` (current version only).

    row: (id, document_id, workspace, parent_id, is_parent, ordinal, char_start, char_end, text, title,
          content_hash, principals, event_time, source_system, kind, author_person_id)
    """
    if doc_ids:
        await conn.execute("DELETE FROM chunks WHERE document_id = ANY($1::uuid[])", list(doc_ids))
    if rows:
        await conn.executemany(
            "INSERT INTO chunks (id, document_id, workspace, parent_id, is_parent, ordinal, char_start, char_end,"
            " text, title, content_hash, principals, event_time, source_system, kind, author_person_id, tsv)"
            " VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,"
            " CASE WHEN $5 THEN NULL ELSE"
            " setweight(to_tsvector('english', coalesce($10, '')), 'A') || to_tsvector('english', $9) END)",
            rows,
        )


async def carry_over_embeddings(conn: asyncpg.Connection, doc_ids: Sequence[uuid.UUID], model: str) -> None:
    """Reuse stored vectors for chunks whose embedded text is unchanged under the same model."""
    if doc_ids:
        await conn.execute(
            "UPDATE chunks c SET embedding = ec.embedding, embedding_model = ec.embedding_model"
            " FROM embedding_cache ec WHERE c.document_id = ANY($1::uuid[]) AND NOT c.is_parent"
            " AND c.embedding IS NULL AND ec.content_hash = c.content_hash AND ec.embedding_model = $2",
            list(doc_ids),
            model,
        )


async def pending_chunks(
    conn: asyncpg.Connection, doc_ids: Sequence[uuid.UUID], model: str
) -> dict[uuid.UUID, list[uuid.UUID]]:
    """Child chunks of the documents that still need a vector for ``model``."""
    rows = await conn.fetch(
        "SELECT document_id, id FROM chunks WHERE document_id = ANY($1::uuid[]) AND NOT is_parent AND NOT deleted"
        " AND (embedding IS NULL OR embedding_model IS DISTINCT FROM $2) ORDER BY document_id, ordinal",
        list(doc_ids),
        model,
    )
    out: dict[uuid.UUID, list[uuid.UUID]] = {}
    for r in rows:
        out.setdefault(r["document_id"], []).append(r["id"])
    return out


async def sync_chunk_access(conn: asyncpg.Connection, states: Sequence[DocState]) -> None:
    """Denormalise principals and tombstones from documents onto their chunks."""
    if states:
        await conn.executemany(
            "UPDATE chunks SET principals = $2, deleted = $3 WHERE document_id = $1"
            " AND (principals IS DISTINCT FROM $2 OR deleted IS DISTINCT FROM $3)",
            [(s.id, list(s.principals), s.deleted_at is not None) for s in states],
        )


async def replace_participants(
    conn: asyncpg.Connection, doc_ids: Sequence[uuid.UUID], rows: Sequence[tuple[uuid.UUID, uuid.UUID, str]]
) -> None:
    if doc_ids:
        await conn.execute("DELETE FROM participants WHERE document_id = ANY($1::uuid[])", list(doc_ids))
    if rows:
        await conn.executemany(
            "INSERT INTO participants (document_id, person_id, role) VALUES ($1,$2,$3) ON CONFLICT DO NOTHING",
            list(dict.fromkeys(rows)),
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
