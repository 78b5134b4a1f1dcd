"""The second round's query levers (pure parts): phrase boost, thread spread, first / last, the join merge,
and the window assembly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

from retriever.hits import Hit, RankedHit
from retriever.multihop import Neighbour
from retriever.query_levers import boost_phrases, merge_join, order_by_time, spread_threads, without_names
from retriever.rows import ChunkRow
from retriever.windows import assemble

T0 = datetime(2024, 5, 1, tzinfo=UTC)


def hit(cid: str, text: str = "", minute: int = 0) -> Hit:
    return Hit(cid, f"doc-{cid}", f"h-{cid}", None, text or f"text {cid}", T0 + timedelta(minutes=minute), "user")


def ranked(*items: tuple[Any, ...]) -> list[RankedHit]:
    """(chunk id, score[, text[, minute]]) each."""
    out = []
    for i, item in enumerate(items):
        cid, score = str(item[0]), float(item[1])
        text = str(item[2]) if len(item) > 2 else ""
        minute = int(item[3]) if len(item) > 3 else 0
        h = hit(cid, text, minute)
        out.append(RankedHit(h, score, score, MappingProxyType({"lexical": i + 1}), MappingProxyType({})))
    return out


def order(hits: list[RankedHit]) -> list[tuple[str, float]]:
    return [(rh.hit.chunk_id, round(rh.score, 6)) for rh in hits]


def test_a_quoted_phrase_lifts_the_passage_that_carries_it() -> None:
    hits = ranked(("a", 1.0, "we listened to some music"), ("b", 0.8, "I love The Four  Seasons by Vivaldi"))
    assert order(boost_phrases(hits, ["the four seasons"], 1.5)) == [("b", 1.2), ("a", 1.0)]
    assert order(boost_phrases(hits, [], 1.5)) == order(hits)
    assert boost_phrases(hits, ["four seasons"], 1.5)[0].boosts == {"phrase": 1.5}


def test_thread_spread_discounts_each_further_hit_of_a_thread() -> None:
    hits = ranked(("a", 1.0), ("b", 0.9), ("c", 0.8), ("d", 0.7))
    threads = {"a": "s1", "b": "s1", "c": "s1", "d": "s2"}  # d's thread is new
    out = spread_threads(hits, threads, 0.8)
    assert order(out) == [("a", 1.0), ("b", 0.72), ("d", 0.7), ("c", 0.512)]
    assert order(spread_threads(hits, threads, 1.0)) == order(hits)
    assert order(spread_threads(hits, {}, 0.5)) == order(hits)  # no thread known: no group


def test_first_and_last_reorder_only_the_close_contenders_by_time() -> None:
    hits = ranked(("new", 1.0, "", 30), ("old", 0.9, "", 0), ("mid", 0.85, "", 10), ("weak", 0.5, "", -60))
    first = order_by_time(hits, "first", 0.8)
    assert order(first) == [("old", 1.0), ("mid", 0.9), ("new", 0.85), ("weak", 0.5)]  # weak stays below
    assert order(order_by_time(hits, "last", 0.8)) == [("new", 1.0), ("mid", 0.9), ("old", 0.85), ("weak", 0.5)]
    assert order(order_by_time(hits, None, 0.8)) == order(hits)


def test_without_names_removes_names_and_possessives() -> None:
    assert (
        without_names("What have Jon and Gina's friends both painted?", ["Gina"])
        == "What have Jon and friends both painted?"
    )


def test_join_merge_adds_the_other_sides_evidence_below_the_best_and_keeps_better_scores() -> None:
    hits = ranked(("a", 1.0), ("b", 0.3))
    shares = {"b": 1.0, "x": 0.5, "gone": 1.0}  # "gone" has no Hit: not visible, not added
    out = merge_join(hits, shares, {"x": hit("x")}, 0.9)
    assert order(out) == [("a", 1.0), ("b", 0.9), ("x", 0.45)]
    assert out[2].arm_ranks == {"join": 1}
    assert order(merge_join(hits, shares, {"x": hit("x")}, 0.0)) == order(hits)


def row(cid: str, minute: int) -> ChunkRow:
    return ChunkRow(
        cid,
        f"doc-{cid}",
        "h",
        None,
        "t",
        None,
        T0 + timedelta(minutes=minute),
        ("g",),
        0.0,
        "message",
        "slack",
        f"ext-{cid}",
        None,
    )


def test_window_assembly_orders_members_by_time_and_drops_unfetched_neighbours() -> None:
    rows = {"s": row("s", 5), "p": row("p", 1), "n": row("n", 9)}
    neighbours = [Neighbour("s", "n", 1), Neighbour("s", "p", -1), Neighbour("s", "hidden", 1)]
    out = assemble(["s", "unseen"], neighbours, rows)
    assert out == {"s": [{"chunk_id": c, "external_id": f"ext-{c}"} for c in ("p", "s", "n")]}
