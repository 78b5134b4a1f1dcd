"""Exact, maintained lexical statistics (migration 0014, issue 26): the same corpus ranks the same before and
after ANALYZE. BM25's N and the terms' shares used to come from the planner's statistics, under which a group
first seen after the last ANALYZE looked like a handful of visible chunks instead of all of them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from retriever.compose import TimeAxes
from retriever.lexical import lexeme_counts, lexical_arm
from retriever.passages import PassageSearcher
from retriever.scope import SearchScope
from retriever.wiring import get_service
from schemas.tools import PassageFilters
from services.settings import Settings
from services.viewer import Principals
from tests.integration.helpers import connect, envelope, eventually, fetchval, later, principal, produce

NOW = datetime(2026, 1, 1, tzinfo=UTC)
AXES = TimeAxes(None, None, None, None, None, None, None, "none")

COUNTS = (
    "SELECT workspace, principals, count(*) FROM chunk_lexemes GROUP BY 1, 2"
    " EXCEPT SELECT workspace, principals, n FROM chunk_acl_counts WHERE n > 0"
)
LEXEMES = (
    "SELECT workspace, l, count(*) FROM chunk_lexemes, unnest(tsvector_to_array(tsv)) AS l GROUP BY 1, 2"
    " EXCEPT SELECT workspace, lexeme, n FROM lexeme_counts WHERE n > 0"
)


WORDS = ["kiln", "glaze", "clay", "wheel", "pottery", "fair", "stall", "ticket", "heron", "lagoon"]


def text(topic: str, i: int) -> str:
    return f"{topic} note {i}: the {WORDS[i % 10]} and the {WORDS[(i * 3) % 10]} for {WORDS[(i * 7) % 10]} day"


def texts(group: str, n: int, topic: str) -> list[Any]:
    return [envelope(f"{group}-{i}", text(topic, i), principals=[group], event_time=later(i)) for i in range(n)]


async def test_rankings_do_not_change_when_analyze_runs(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline("ingest", "embed")
    old, new = principal(), principal()
    await produce(settings, *texts(old, 120, "studio"))
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM chunk_lexemes"), until=lambda n: n == 120)
    conn = await connect(settings)
    try:
        await conn.execute("ANALYZE chunks")  # the planner has seen the old group only
    finally:
        await conn.close()
    await produce(settings, *texts(new, 40, "market"))
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM chunk_lexemes"), until=lambda n: n == 160)
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM chunks WHERE NOT is_parent AND embedding IS NULL"),
        until=lambda n: n == 0,
    )
    service = get_service(rt).passages
    viewer = Principals((new,))

    async def ranking(arms: str, query: str) -> list[tuple[str, float]]:
        # a fresh searcher each time: nothing read before ANALYZE is carried past it in a cache
        passages = PassageSearcher(
            pool=service.pool, hierarchy=service.hierarchy, embedder=service.embedder, embedding=service.embedding
        )
        found = await passages.search(
            query=query,
            workspace="default",
            filters=PassageFilters(),
            limit=10,
            arms=arms,
            viewer=viewer,
            own=[new],
            axes=AXES,
            now=NOW,
        )
        assert found.ranked
        return [(rh.hit.chunk_id, round(rh.score, 9)) for rh in found.ranked]

    async def raw(query: str) -> list[tuple[str, float]]:
        conn = await connect(settings)
        try:
            found = await lexical_arm(conn, SearchScope("default", viewer), query, 40, maintained=True)
        finally:
            await conn.close()
        return [(i, round(found.scores[i], 9)) for i in found.ids]

    queries = ["heron lagoon market day", "which ticket for the pottery fair stall?", "kiln glaze"]
    before_raw = {q: await raw(q) for q in queries}
    before = {(a, q): await ranking(a, q) for a in ("lexical", "full") for q in queries}
    conn = await connect(settings)
    try:
        # the lexical arm's N is the exact count of the new group's chunks, not a planner estimate
        stats = await lexeme_counts(conn, SearchScope("default", viewer), ["heron", "nosuchword"])
        assert stats.visible_rows == 40 and stats.rows == 160
        assert (
            stats.share("heron")
            == await fetchval(settings, "SELECT count(*) FROM chunk_lexemes WHERE tsv @@ 'heron'::tsquery") / 160
        )
        assert stats.share("nosuchword") == 0.0
        await conn.execute("ANALYZE chunks")
        await conn.execute("ANALYZE chunk_lexemes")
    finally:
        await conn.close()
    assert {q: await raw(q) for q in queries} == before_raw
    after = {(a, q): await ranking(a, q) for a in ("lexical", "full") for q in queries}
    assert after == before


async def test_counts_follow_deletes_acl_changes_and_new_versions(settings: Settings, pipeline: Any) -> None:
    await pipeline("ingest")
    g, h = principal(), principal()
    await produce(settings, *texts(g, 12, "studio"))
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM chunk_lexemes"), until=lambda n: n == 12)
    # a new version (new text), an ACL move to another group and a tombstone
    await produce(
        settings,
        envelope(f"{g}-0", "an entirely different egret sentence", principals=[g], event_time=later(100)),
        envelope(f"{g}-1", text("studio", 1), principals=[h], event_time=later(101)),
        envelope(f"{g}-2", principals=[g], op="delete", event_time=later(102)),
    )
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM chunk_lexemes"), until=lambda n: n == 11)
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM chunk_lexemes WHERE principals = $1::text[]", [h]),
        until=lambda n: n == 1,
    )
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM chunk_lexemes WHERE tsv @@ 'egret'::tsquery"),
        until=lambda n: n == 1,
    )
    assert await fetchval(settings, f"SELECT count(*) FROM ({COUNTS}) x") == 0
    assert await fetchval(settings, f"SELECT count(*) FROM ({LEXEMES}) x") == 0
    assert await fetchval(settings, "SELECT sum(n) FROM chunk_acl_counts") == 11
    assert await fetchval(settings, "SELECT n FROM lexeme_counts WHERE lexeme = 'egret'") == 1
