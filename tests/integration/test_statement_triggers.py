"""Migration 0016: chunk_lexemes and its exact counts follow multi-row statements on chunks (the ingest batch's one
INSERT, one DELETE, a bulk ACL UPDATE) — the statement triggers' net deltas equal a recount, also when rows of one
statement share lexemes and principals and when an UPDATE moves some rows and leaves others as they were."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from services.settings import Settings
from tests.integration.helpers import connect
from tests.integration.test_lexical_counts import COUNTS, LEXEMES

pytestmark = pytest.mark.integration

LIVE = "SELECT id, workspace, principals, tsv FROM chunks WHERE NOT is_parent AND NOT deleted AND tsv IS NOT NULL"
MIRRORED = "SELECT id, workspace, principals, tsv FROM chunk_lexemes"


async def _exact(conn: asyncpg.Connection) -> None:
    """The mirror equals the live children both ways, and the counts equal a recount."""
    for sql in (COUNTS, LEXEMES, f"{LIVE} EXCEPT {MIRRORED}", f"{MIRRORED} EXCEPT {LIVE}"):
        assert await conn.fetchval(f"SELECT count(*) FROM ({sql}) x") == 0, sql
    assert await conn.fetchval("SELECT count(*) FROM lexeme_counts WHERE n < 0") == 0


async def test_counts_follow_multi_row_statements(settings: Settings) -> None:
    conn = await connect(settings)
    g1, g2 = f"group:{uuid.uuid4()}", f"group:{uuid.uuid4()}"
    try:
        doc = uuid.uuid4()
        await conn.execute(
            "INSERT INTO documents (id, workspace, source_system, external_id, kind, event_time, current_version,"
            " principals, structured_fields) VALUES ($1, 'default', 'slack', 'x', 'message', now(), 1, $2, '{}')",
            doc,
            [g1],
        )
        words = ["heron lagoon kiln", "heron glaze", "lagoon stall ticket", "kiln kiln heron", "fair"]
        await conn.execute(  # one statement: 5 children sharing lexemes and one principal set, and a parent
            "INSERT INTO chunks (id, document_id, workspace, is_parent, ordinal, char_start, char_end, text,"
            " content_hash, principals, event_time, source_system, kind, tsv)"
            " SELECT gen_random_uuid(), $1, 'default', i = 0, i, 0, 1, t, md5(t), $2, now(), 'slack', 'message',"
            " CASE WHEN i = 0 THEN NULL ELSE to_tsvector('english', t) END"
            " FROM unnest($3::text[]) WITH ORDINALITY AS u(t, i0), LATERAL (SELECT (i0 - 1)::int AS i) o",
            doc,
            [g1],
            ["parent", *words],
        )
        assert await conn.fetchval("SELECT count(*) FROM chunk_lexemes") == 5
        assert await conn.fetchval("SELECT n FROM lexeme_counts WHERE lexeme = 'heron'") == 3
        await _exact(conn)
        # a bulk ACL move of some rows (the others updated to the same value: no net change), then a tombstone
        await conn.execute(
            "UPDATE chunks SET principals = CASE WHEN ordinal % 2 = 1 THEN $1 ELSE principals END"
            " WHERE document_id = $2",
            [g2],
            doc,
        )
        await _exact(conn)
        await conn.execute("UPDATE chunks SET deleted = true WHERE document_id = $1 AND ordinal = 2", doc)
        await conn.execute("UPDATE chunks SET tsv = to_tsvector('english', 'egret egret') WHERE ordinal = 3")
        await _exact(conn)
        await conn.execute("DELETE FROM chunks WHERE document_id = $1 AND ordinal <= 3", doc)  # one statement
        await _exact(conn)
        assert await conn.fetchval("SELECT coalesce(sum(n), 0) FROM chunk_acl_counts") == 2
        await conn.execute("DELETE FROM chunks WHERE document_id = $1", doc)
        await _exact(conn)
        assert await conn.fetchval("SELECT coalesce(sum(n), 0) FROM lexeme_counts") == 0
    finally:
        await conn.close()
