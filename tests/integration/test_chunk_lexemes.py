"""``chunk_lexemes`` (migration 0009), the lexical arm's narrow table, stays in step with ``chunks`` on every
path that writes or deletes chunks, on the real pipeline: ingest, a new version, the index-context rewrite of a
thread, an ACL change, a tombstone, a retention purge, an embed pass (which must not touch it), a replay."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from retriever.lexical import lexical_arm
from retriever.scope import SearchScope
from services.ops.replay import replay
from services.settings import Settings
from services.viewer import Principals
from tests.integration.admin_helpers import ADMIN, api_client
from tests.integration.helpers import connect, envelope, eventually, fetch, fetchval, later, principal, produce
from tests.integration.test_index_context import in_thread

pytestmark = pytest.mark.timeout(180)

LIVE = (
    "SELECT id, document_id, workspace, principals, source_system, kind, event_time, author_person_id, tsv::text,"
    " length(tsv) AS dl FROM chunks WHERE NOT is_parent AND NOT deleted AND tsv IS NOT NULL ORDER BY id"
)
NARROW = (
    "SELECT id, document_id, workspace, principals, source_system, kind, event_time, author_person_id, tsv::text,"
    " dl FROM chunk_lexemes ORDER BY id"
)

ACL_COUNTED = "SELECT workspace, principals, count(*) FROM chunk_lexemes GROUP BY 1, 2"
ACL_KEPT = "SELECT workspace, principals, n FROM chunk_acl_counts WHERE n <> 0"
LEXEMES_COUNTED = "SELECT workspace, l, count(*) FROM chunk_lexemes, unnest(tsvector_to_array(tsv)) AS l GROUP BY 1, 2"
LEXEMES_KEPT = "SELECT workspace, lexeme, n FROM lexeme_counts WHERE n <> 0"


async def in_step(settings: Settings) -> list[Any]:
    """The narrow table equals the live child chunks, column for column; returns its rows."""
    live = [tuple(r) for r in await fetch(settings, LIVE)]
    narrow = [tuple(r) for r in await fetch(settings, NARROW)]
    assert narrow == live
    # and the maintained BM25 counts of migration 0014 equal the ones recounted from it
    for counted, kept in ((ACL_COUNTED, ACL_KEPT), (LEXEMES_COUNTED, LEXEMES_KEPT)):
        assert sorted(tuple(r) for r in await fetch(settings, counted)) == sorted(
            tuple(r) for r in await fetch(settings, kept)
        )
    return narrow


async def lexical(settings: Settings, viewer: str, query: str) -> set[str]:
    conn = await connect(settings)
    try:
        hits = await lexical_arm(conn, SearchScope("default", Principals((viewer,))), query, 10, None)
        if not hits.ids:
            return set()
        rows = await conn.fetch(
            "SELECT d.external_id FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.id = ANY($1::uuid[])",
            [uuid.UUID(i) for i in hits.ids],
        )
        return {r["external_id"] for r in rows}
    finally:
        await conn.close()


async def test_every_chunk_write_path_keeps_the_narrow_table_in_step(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline("ingest", "embed", "retrieve")
    g, h = principal(), principal()

    def msg(ext: str, text: str, minute: int, principals: list[str]) -> Any:
        return in_thread(envelope(ext, text, principals=principals, event_time=later(minute)), "t-1")

    # ingest: a thread of three messages (the index context of B and C carries their predecessor)
    await produce(
        settings,
        msg("A", "The quokka migration starts Monday.", 0, [g]),
        msg("B", "Who owns the rollback plan?", 1, [g]),
        envelope("D", "A design doc about the pelican cache.\n\nIt has two sections.", principals=[g], kind="document"),
    )
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM chunks WHERE NOT is_parent AND embedding IS NOT NULL"),
        until=lambda n: n >= 3,
        timeout=60,
    )
    rows = await in_step(settings)
    assert len(rows) >= 3
    assert await lexical(settings, g, "quokka") == {"A", "B"}  # B is indexed with A's text as context
    # an out-of-order arrival rewrites its follower's tsvector (index context)
    await produce(settings, msg("C", "I do, says Priya.", 2, [g]))
    await eventually(lambda: lexical(settings, g, "rollback"), until=lambda ids: ids == {"B", "C"})
    await in_step(settings)
    # a new version of A replaces its chunks
    await produce(settings, msg("A", "The wombat migration starts Tuesday.", 5, [g]))
    await eventually(lambda: lexical(settings, g, "wombat"), until=lambda ids: "A" in ids)
    await in_step(settings)
    assert "A" not in await lexical(settings, g, "quokka")
    # an ACL change moves D to another group: the narrow table's principals follow
    await produce(
        settings,
        envelope(
            "D",
            "A design doc about the pelican cache.\n\nIt has two sections.",
            principals=[h],
            kind="document",
            event_time=later(6),
        ),
    )
    await eventually(lambda: lexical(settings, h, "pelican"), until=lambda ids: ids == {"D"})
    await in_step(settings)
    assert await lexical(settings, g, "pelican") == set()
    # a tombstone takes the message out
    await produce(settings, envelope("C", op="delete", principals=[g], event_time=later(7)))
    await eventually(lambda: lexical(settings, g, "priya"), until=lambda ids: "C" not in ids)
    await in_step(settings)
    # a retention purge deletes the tombstoned chunks for good
    async with api_client(rt) as client:
        ok = await client.put(
            "/v1/admin/retention/policies",
            json={"workspace": "default", "purge_tombstoned_after_days": 0},
            headers=ADMIN,
        )
        assert ok.status_code == 200, ok.text
        run = await client.post("/v1/admin/retention/run", params={"apply": "true"}, headers=ADMIN)
        assert run.status_code == 200, run.text
    assert await fetchval(settings, "SELECT count(*) FROM documents WHERE external_id = 'C'") == 0
    rows = await in_step(settings)
    # replay of the ingest stage re-applies every envelope: same rows (idempotent), still in step
    await replay(settings, "ingest", start=None)
    assert await in_step(settings) == rows


async def test_rows_written_outside_the_pipeline_follow_too(settings: Settings) -> None:
    """Direct SQL (COPY loads, operators): parents never get a row; deleting or flipping a chunk removes it."""
    conn = await connect(settings)
    try:
        did = await conn.fetchval(
            "INSERT INTO documents (id, workspace, source_system, external_id, kind, event_time, current_version,"
            " principals) VALUES (gen_random_uuid(), 'default', 'slack', 'x', 'message', now(), 1, '{group:a}')"
            " RETURNING id"
        )
        for parent in (True, False):
            await conn.execute(
                "INSERT INTO chunks (id, document_id, workspace, is_parent, ordinal, char_start, char_end, text,"
                " content_hash, principals, event_time, source_system, kind, tsv) VALUES (gen_random_uuid(), $1,"
                " 'default', $2, 0, 0, 5, 'heron', 'h', '{group:a}', now(), 'slack', 'message',"
                " to_tsvector('english', 'heron'))",
                did,
                parent,
            )
        assert await conn.fetchval("SELECT count(*) FROM chunk_lexemes") == 1
        await conn.execute("UPDATE chunks SET deleted = true WHERE NOT is_parent")
        assert await conn.fetchval("SELECT count(*) FROM chunk_lexemes") == 0
        await conn.execute("UPDATE chunks SET deleted = false, principals = '{group:b}' WHERE NOT is_parent")
        assert await conn.fetchval("SELECT principals FROM chunk_lexemes") == ["group:b"]
        # vectors and access counts (the embed stage, retrieval) leave the row alone: same tuple version
        xmin = await conn.fetchval("SELECT xmin::text FROM chunk_lexemes")
        await conn.execute("UPDATE chunks SET embedding_model = 'm', access_count = access_count + 1")
        assert await conn.fetchval("SELECT xmin::text FROM chunk_lexemes") == xmin
        await conn.execute("UPDATE chunks SET tsv = NULL WHERE NOT is_parent")
        assert await conn.fetchval("SELECT count(*) FROM chunk_lexemes") == 0
        await conn.execute("UPDATE chunks SET tsv = to_tsvector('english', 'egret') WHERE NOT is_parent")
        assert await conn.fetchval("SELECT tsv::text FROM chunk_lexemes") == "'egret':1"
        await conn.execute("DELETE FROM chunks")
        assert await conn.fetchval("SELECT count(*) FROM chunk_lexemes") == 0
    finally:
        await conn.close()
