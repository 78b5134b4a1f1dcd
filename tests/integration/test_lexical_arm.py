"""The BM25 arm on real Postgres: planner lexeme statistics drive candidate generation (rare terms
first) without changing which documents win, and the ACL still holds."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from retriever import lexical
from retriever.lexical import any_of, lexeme_stats, lexical_arm
from retriever.scope import SearchScope
from services.settings import Settings
from services.viewer import Principals
from tests.integration.helpers import connect

VIEWER = "group:readers"


async def _load(settings: Settings, n: int) -> dict[str, str]:
    """``n`` visible chunks about the weekly team update; three also name Project Heron; one Heron
    chunk is private to someone else. Returns chunk id -> label."""
    conn = await connect(settings)
    labels: dict[str, str] = {}
    try:
        for i in range(n):
            heron = i in (5, 50, 150, 250)
            private = i == 250
            text = f"weekly team update number {i} from the platform team meeting"
            if heron:
                text += " about project heron"
            did, cid = uuid.uuid4(), uuid.uuid4()
            principals = ["user:someone-else"] if private else [VIEWER]
            when = datetime(2025, 1, 1, tzinfo=UTC)
            await conn.execute(
                "INSERT INTO documents (id, workspace, source_system, external_id, kind, title, event_time,"
                " current_version, principals) VALUES ($1, 'default', 'slack', $2, 'message', NULL, $3, 1, $4)",
                did,
                f"m{i}",
                when,
                principals,
            )
            await conn.execute(
                "INSERT INTO chunks (id, document_id, workspace, parent_id, is_parent, ordinal, char_start, char_end,"
                " text, content_hash, principals, event_time, source_system, kind, tsv)"
                " VALUES ($1, $2, 'default', NULL, false, 0, 0, length($3), $3, $4, $5, $6, 'slack', 'message',"
                " to_tsvector('english', $3))",
                cid,
                did,
                text,
                uuid.uuid4().hex,
                principals,
                when,
            )
            labels[str(cid)] = ("private-heron" if private else "heron") if heron else "plain"
        await conn.execute("ANALYZE chunks")
    finally:
        await conn.close()
    return labels


async def test_rare_terms_generate_candidates_and_rank_like_the_full_scan(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    labels = await _load(settings, 300)
    scope = SearchScope("default", Principals((VIEWER,)))
    conn = await connect(settings)
    try:
        stats = await lexeme_stats(conn)
        assert stats is not None
        assert stats.share("team") > 0.9
        assert stats.share("heron") < 0.05
        # exact BM25: every term generates, every matching chunk is a candidate, every df is counted
        full = await lexical_arm(conn, scope, "heron team meeting", 10, None)
        monkeypatch.setattr(lexical, "BM25_CANDIDATES", 40)  # "team" (299 visible rows) is now a common term
        rare = await lexical_arm(conn, scope, "heron team meeting", 10, stats)
    finally:
        await conn.close()
    assert rare.note == "bm25 (candidates from 1 of 3 terms)"
    assert full.note == "bm25"
    assert [labels[i] for i in rare.ids] == ["heron", "heron", "heron"]  # the private one never shows
    assert set(full.ids[:3]) == set(rare.ids)
    assert all(labels[i] != "private-heron" for i in full.ids)
    # same documents, same order, scores within 10 %: the common terms' df is estimated, and avgdl is
    # taken over the (now fewer) candidates
    assert full.ids[:3] == rare.ids
    for cid in rare.ids:
        assert rare.scores[cid] == pytest.approx(full.scores[cid], rel=0.10)


async def test_no_statistics_means_every_term_generates(settings: Settings) -> None:
    conn = await connect(settings)
    try:
        assert await lexeme_stats(conn) is None  # empty, never analysed
    finally:
        await conn.close()


async def test_candidate_query_matches_lexemes_verbatim(settings: Settings) -> None:
    """Compound lexemes (URLs, hyphenated names) and quotes or backslashes reach the tsquery as they are."""
    text = "See sf-internal.slack.com/archives/x, O'Brien's dev-ops\\notes and develop-iansmith-feedbackforce"
    conn = await connect(settings)
    try:
        lexemes = await conn.fetchval("SELECT tsvector_to_array(to_tsvector('english', $1))", text)
        assert any("/" in t for t in lexemes) and any("-" in t for t in lexemes)
        for t in lexemes:
            q = await conn.fetchval("SELECT querytree($1::tsquery)", any_of([t]))
            assert q == "'" + t.replace("'", "''") + "'"  # one lexeme, not a phrase of its parts
            assert await conn.fetchval("SELECT to_tsvector('english', $1) @@ $2::tsquery", text, any_of([t]))
        assert not await conn.fetchval("SELECT to_tsvector('english', 'nothing here') @@ $1::tsquery", any_of(lexemes))
    finally:
        await conn.close()
