"""The second round's query-understanding levers over a ranked list (pure, except :func:`thread_keys` and
:func:`around_names`, which read under the caller's :class:`SearchScope`).

Each lever acts only when :func:`retriever.query_shape.parse_query` found its cue, so a question without one
ranks as before:

- quoted phrase → a hit carrying it verbatim × :data:`PHRASE_BOOST`;
- aggregate question → each further hit of a thread already ranked × :data:`THREAD_REPEAT` (the top ranks span
  threads: the evidence of "what activities does Melanie partake in?" is spread over sessions);
- first / last → the close contenders (score ≥ :data:`ORDER_BAND` × the best) re-ordered oldest / newest first,
  keeping the band's scores (a far weaker hit never jumps up for its date);
- names → a lexical search of the question without its names (:func:`around_names`), its hits merged at ≤
  :data:`JOIN_FACTOR` × the best first-round score before the author boost: the evidence around each named
  person (their own messages, which rarely carry their name) joins the pool, and the author boost picks it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import asyncpg

from retriever.boosts import diversify, rescored, sort_ranked
from retriever.hits import Hit, RankedHit
from retriever.lexical import lexical_arm
from retriever.query_shape import QueryShape, parse_query
from retriever.rows import ChunkRow, fetch_chunks, per_chunk
from retriever.scope import SearchScope

PHRASE_BOOST = 1.5
"""Score factor of a hit that carries a quoted phrase of the question verbatim."""
THREAD_REPEAT = 1.0
"""In an aggregate question, the factor per earlier hit of the same thread (1.0 = off: 0.8 cost LoCoMo dev
recall@10 0.011, see docs/evaluation.md)."""
ORDER_BAND = 0.8
"""First / last re-orders the hits scoring at least this share of the best by time (1.0 = off)."""
JOIN_FACTOR = 0.0
"""A join sub-search's best hit enters at this × the first round's best score (0 = off, the default: at 0.9 it
was +0.001 on LoCoMo dev and did not win on the test split, see docs/evaluation.md)."""
JOIN_K = 20
"""Hits taken from the search around the names."""
JOIN_MIN_NAMES = 2
"""The search around the names runs for a question naming at least this many (2 = join questions only: for
one name it cost LoCoMo dev recall@10 0.021, see docs/evaluation.md)."""


def boost_phrases(ranked: Sequence[RankedHit], phrases: Sequence[str], factor: float = PHRASE_BOOST) -> list[RankedHit]:
    """Hits whose text contains one of ``phrases`` (case-insensitive, whitespace-normalised) × ``factor``."""
    if not phrases or factor == 1.0:
        return list(ranked)
    wanted = [" ".join(p.lower().split()) for p in phrases]
    out = []
    for rh in ranked:
        text = " ".join(rh.hit.text.lower().split())
        if any(p in text for p in wanted):
            rh = rescored(rh, rh.score * factor, {**rh.boosts, "phrase": factor})
        out.append(rh)
    return sort_ranked(out)


def spread_threads(
    ranked: Sequence[RankedHit], threads: Mapping[str, str], factor: float = THREAD_REPEAT
) -> list[RankedHit]:
    """Each further hit of a thread already ranked × ``factor`` per earlier one (hits without a thread: none)."""
    return diversify(ranked, factor, key=lambda rh: threads.get(rh.hit.chunk_id), label="thread_repeat")


def order_by_time(ranked: Sequence[RankedHit], order: str | None, band: float = ORDER_BAND) -> list[RankedHit]:
    """For ``first`` / ``last``: the hits scoring ≥ ``band`` × the best, oldest / newest first; they take the
    band's scores in that order (the rest of the list is untouched)."""
    if order not in ("first", "last") or band >= 1.0 or not ranked:
        return list(ranked)
    best = ranked[0].score
    close = [rh for rh in ranked if rh.score >= band * best]
    rest = [rh for rh in ranked if rh.score < band * best]
    scores = sorted((rh.score for rh in close), reverse=True)
    by_time = sorted(close, key=lambda rh: (rh.hit.event_time, rh.hit.chunk_id), reverse=order == "last")
    moved = [rescored(rh, s, {**rh.boosts, "order": 1.0}) for rh, s in zip(by_time, scores, strict=True)]
    return [*moved, *rest]


def without_names(query: str, names: Sequence[str]) -> str:
    """``query`` with each of ``names`` (and its possessive) removed."""
    out = query
    for n in names:
        out = re.sub(rf"\b{re.escape(n)}(?:['’]s)?\b", " ", out)
    return " ".join(out.split())


async def thread_keys(conn: asyncpg.Connection, chunk_ids: Sequence[str]) -> dict[str, str]:
    """Thread (else channel) of each of ``chunk_ids`` (already fetched under the viewer's scope)."""
    return await per_chunk(
        conn, chunk_ids, "d.source_system || '/' || coalesce(d.thread_external_id, d.parent_external_id)"
    )


async def around_names(
    conn: asyncpg.Connection, scope: SearchScope, query: str, shape: QueryShape, k: int = JOIN_K
) -> dict[str, float]:
    """For a question that names people or things: a lexical search of the question without its names, under
    ``scope``; chunk id → its share of the sub-search's top BM25 score. A name is a poor search term in a chat:
    it matches every message that addresses the person ("Thanks, Caroline!") and, through the index context,
    every message after theirs; the named author's own messages are picked out by the author boost instead."""
    if not shape.names:
        return {}
    rest = without_names(query, shape.names)
    if rest == query or not rest:
        return {}
    found = await lexical_arm(conn, scope, rest, k, maintained=True)
    top = max(found.scores.values(), default=0.0)
    if top <= 0:
        return {}
    return {cid: found.scores.get(cid, 0.0) / top for cid in found.ids}


def merge_join(
    ranked: Sequence[RankedHit], shares: Mapping[str, float], hits: Mapping[str, Hit], factor: float = JOIN_FACTOR
) -> list[RankedHit]:
    """``ranked`` with the join sub-searches' hits at ``factor`` × best score × share (pure); a hit already ranked
    keeps the better of its two scores, a new one needs its ``Hit`` (fetched under the viewer's scope)."""
    if not ranked or factor <= 0 or not shares:
        return list(ranked)
    best = ranked[0].score
    out = {rh.hit.chunk_id: rh for rh in ranked}
    for cid, share in shares.items():
        score = best * factor * share
        current = out.get(cid)
        if current is not None:
            if score > current.score:
                out[cid] = rescored(current, score, {**current.boosts, "join": factor})
        elif cid in hits:
            marks = MappingProxyType({"join": 1})
            out[cid] = RankedHit(hits[cid], score, 0.0, marks, MappingProxyType({"join": factor}))
    return sort_ranked(out.values())


async def apply_levers(
    conn: asyncpg.Connection, query: str, ranked: Sequence[RankedHit]
) -> tuple[list[RankedHit], dict[str, Any]]:
    """The levers the question's shape asks for, in order: phrase, thread spread, first / last (the search
    around the names runs before the author boost: :func:`join_names`). The knobs are read at call time (the
    ablation patches them). Also what each lever did."""
    shape = parse_query(query)
    out = boost_phrases(ranked, shape.phrases, PHRASE_BOOST)
    diag: dict[str, Any] = {"phrases": len(shape.phrases), "names": len(shape.names), "order": shape.order}
    if shape.aggregate and THREAD_REPEAT < 1.0:
        out = spread_threads(out, await thread_keys(conn, [rh.hit.chunk_id for rh in out]), THREAD_REPEAT)
        diag["aggregate"] = True
    return order_by_time(out, shape.order, ORDER_BAND), diag


async def join_names(
    conn: asyncpg.Connection,
    scope: SearchScope,
    query: str,
    ranked: Sequence[RankedHit],
    rows: Mapping[str, ChunkRow],
    make_hit: Callable[[ChunkRow], Hit],
    people: Collection[str],
) -> tuple[list[RankedHit], dict[str, ChunkRow], int]:
    """``ranked`` joined with :func:`around_names`' hits (new ones fetched under ``scope``), the rows, and how
    many hits it added. Only the question's names that are ``people`` (name parts of the candidates' authors)
    count: "What API did Project Lighthouse need from the Search team?" names no person and is no join."""
    shape = parse_query(query)
    shape = replace(shape, names=tuple(n for n in shape.names if n in people))
    if JOIN_FACTOR <= 0 or len(shape.names) < max(JOIN_MIN_NAMES, 1) or not ranked:
        return list(ranked), dict(rows), 0
    shares = await around_names(conn, scope, query, shape, JOIN_K)
    out_rows = dict(rows)
    missing = [c for c in shares if c not in out_rows]
    if missing:
        out_rows.update(await fetch_chunks(conn, scope, missing))
    hits = {c: make_hit(out_rows[c]) for c in shares if c in out_rows}
    merged = merge_join(ranked, shares, hits, JOIN_FACTOR)
    return merged, out_rows, len(merged) - len(ranked)
