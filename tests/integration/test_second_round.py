"""The full arm's second round on real Kafka + Postgres (retriever/multihop.py): the following thread
neighbour is the next message the viewer can see (never one outside its principals), and the named
author's messages are boosted by the people the projection holds."""

from __future__ import annotations

from datetime import timedelta
from types import MappingProxyType
from typing import Any

from retriever import multihop
from retriever.hits import Hit, RankedHit
from retriever.rows import ChunkRow, fetch_chunks
from retriever.scope import SearchScope
from services.settings import Settings
from services.viewer import Principals
from tests.integration.helpers import connect, envelope, eventually, fetch, later, principal, produce
from tests.integration.test_index_context import conversation, in_thread


async def chunk_ids(settings: Settings) -> dict[str, str]:
    rows = await fetch(
        settings,
        "SELECT d.external_id, c.id FROM chunks c JOIN documents d ON d.id = c.document_id WHERE NOT c.is_parent",
    )
    return {r["external_id"]: str(r["id"]) for r in rows}


def scope(*principals: str) -> SearchScope:
    return SearchScope("default", Principals(tuple(principals)))


def as_hit(r: ChunkRow) -> Hit:
    return Hit(r.chunk_id, r.document_id, r.content_hash, r.title, r.text, r.event_time, "user", r.access_count)


async def test_neighbours_follow_the_thread_within_the_viewers_principals(settings: Settings, pipeline: Any) -> None:
    await pipeline("ingest")
    g, h = principal(), principal()
    conv = conversation(g, h)
    late = in_thread(
        envelope("D", "Next week's pottery fair is on.", principals=[g], event_time=later(240), author_name="Melanie"),
        "conv-1/session-1",
    )
    await produce(settings, *conv.values(), late)
    ids = await eventually(lambda: chunk_ids(settings), until=lambda m: len(m) == 5)
    name = {v: k for k, v in ids.items()}
    conn = await connect(settings)
    try:

        async def following(viewer: tuple[str, ...], seed: str) -> list[str]:
            found = await multihop.thread_neighbours(conn, scope(*viewer), [ids[seed]])
            return [name[n.chunk_id] for n in found]

        # thread order A (g), S (h), B (g), C (g): S is skipped over for a g-viewer, never returned
        assert await following((g,), "A") == ["B"]
        assert await following((g, h), "A") == ["S"]
        assert await following((h,), "S") == []  # B and C are outside h
        assert await following((g,), "C") == []  # D is 4 h later: a new topic, not a reply
        wide = await multihop.thread_neighbours(conn, scope(g), [ids["C"]], max_gap=timedelta(hours=5))
        assert [name[n.chunk_id] for n in wide] == ["D"]
        assert await following((g,), "D") == []  # the last message
        prev = await multihop.thread_neighbours(conn, scope(g), [ids["B"]], following=0, preceding=1)
        assert [name[n.chunk_id] for n in prev] == ["A"]

        # second round as a g-viewer: Caroline's A and C boosted x1.5, B joins after A at 0.5 x A's score
        rows = await fetch_chunks(conn, scope(g), [ids["A"], ids["C"]])
        first = [
            RankedHit(as_hit(rows[ids[x]]), s, s, MappingProxyType({"lexical": i + 1}), MappingProxyType({}))
            for i, (x, s) in enumerate((("A", 1.0), ("C", 0.6)))
        ]
        out = await multihop.second_round(
            conn, scope(g), "What did Caroline say about pottery?", first, rows, as_hit, author_boost=1.5, factor=0.5
        )
        assert [(name[rh.hit.chunk_id], round(rh.score, 6)) for rh in out.ranked] == [
            ("A", 1.5),
            ("C", 0.9),
            ("B", 0.75),
        ]
        assert {k: v for k, v in out.diagnostics.items() if k != "query"} == {
            "author_boosted": 2,
            "neighbours": 1,
            "when_boosted": 0,
        }
        assert out.diagnostics["query"]["joined"] == 0  # the query-understanding levers report what they did
        assert ids["S"] not in out.rows
    finally:
        await conn.close()
