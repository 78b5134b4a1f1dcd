"""SQL of the embedder stage: storing vectors, per-model HNSW indexes, spend (pending chunks and the cache lookup:
``services.chunk_embedding``)."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Sequence

import asyncpg
import numpy as np
from pgvector import Vector

from services.db.vectors import sql_literal, vector_expr

STAGE = "embed"
_LOCK_ID = 727_002


def hnsw_index_name(model: str, dim: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", model.lower())[:30]
    return f"chunks_hnsw_{slug}_{dim}_{hashlib.blake2b(model.encode(), digest_size=3).hexdigest()}"


async def ensure_hnsw_index(conn: asyncpg.Connection, model: str, dim: int) -> str:
    """One partial expression index per (model, dimension): vectors of other models never mix.

    Concurrent builds in one schema are serialised by an advisory lock keyed by the schema: a stage starting
    in one namespace never waits for an index being built in another (on a shared Postgres, an HNSW build
    over a large table holds its lock for minutes)."""
    name = hnsw_index_name(model, dim)
    await conn.execute("SELECT pg_advisory_lock($1, hashtext(current_schema()))", _LOCK_ID)
    try:
        await conn.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON chunks USING hnsw ({vector_expr(dim)} vector_cosine_ops)"
            f" WITH (m = 16, ef_construction = 64)"
            f" WHERE embedding_model = {sql_literal(model)} AND NOT is_parent"
        )
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1, hashtext(current_schema()))", _LOCK_ID)
    return name


def _vector(v: object) -> Vector:
    if isinstance(v, Vector):
        return v
    if isinstance(v, (list, np.ndarray)):
        return Vector(v)
    raise TypeError(f"not a vector: {type(v).__name__}")


async def store_vectors(
    conn: asyncpg.Connection,
    model: str,
    new_cache: dict[str, list[float]],
    assign: Sequence[tuple[uuid.UUID, str]],
    vectors: dict[str, object],
) -> int:
    """Insert new cache rows and set the chunks' vectors (only if their text is still the same).

    One statement each (``unnest`` of arrays), not one round trip per row. Returns the chunks updated.
    """
    if new_cache:
        await conn.execute(
            "INSERT INTO embedding_cache (content_hash, embedding_model, embedding)"
            " SELECT h, $1, e FROM unnest($2::text[], $3::vector[]) AS u(h, e) ON CONFLICT DO NOTHING",
            model,
            list(new_cache),
            [_vector(v) for v in new_cache.values()],
        )
    if not assign:
        return 0
    status = await conn.execute(
        "UPDATE chunks c SET embedding = u.e, embedding_model = $1"
        " FROM unnest($2::uuid[], $3::text[], $4::vector[]) AS u(id, h, e)"
        " WHERE c.id = u.id AND c.content_hash = u.h",
        model,
        [cid for cid, _ in assign],
        [h for _, h in assign],
        [_vector(vectors[h]) for _, h in assign],
    )
    return int(str(status).rsplit(" ", 1)[-1])


async def record_spend(
    conn: asyncpg.Connection,
    workspace: str,
    provider: str,
    model: str,
    purpose: str,
    calls: int,
    items: int,
    tokens: int,
) -> None:
    await conn.execute(
        "INSERT INTO spend (day, workspace, provider, model, purpose, calls, items, tokens)"
        " VALUES (current_date, $1, $2, $3, $4, $5, $6, $7)"
        " ON CONFLICT (day, workspace, provider, model, purpose) DO UPDATE SET calls = spend.calls + EXCLUDED.calls,"
        " items = spend.items + EXCLUDED.items, tokens = spend.tokens + EXCLUDED.tokens",
        workspace,
        provider,
        model,
        purpose,
        calls,
        items,
        tokens,
    )
