"""Second round over the first round's ranking (issue 14 §4): the named author, then conversational neighbours.

**Author match.** A question that names a person ("What did Dana propose for the deploy process?", "When
did Caroline go to the support group?") is most often answered by that person's own messages. A hit whose
author's name (a capitalised part of ``people.display_name`` of ``chunks.author_person_id``) is written in
the question gets ×:data:`AUTHOR_BOOST` (not in a who-question: that asks for someone else) — a field
match, like the title boost of the cascade; the name is never taken from anything but the projection's
people, and it only re-orders hits the viewer already sees.

**When-questions.** A question asking *when* ("When did X …?", "How long ago …?", "What year …?") is
answered by a message that carries a time reference ("yesterday", "last week", "in May", "2023"): the
message's ``event_time`` resolves it. After the neighbours join, such hits get ×:data:`WHEN_BOOST`
(a deterministic parse of the question and of the hit text; no other question is touched).

**Conversational neighbours.** A chat answer is often spread over consecutive messages of one thread
("Did you go?" — "Yes, last Sunday, with the kids" — "We painted a sunrise"): the first round finds the
message that shares the question's words, the message after it carries the rest. The preceding message is
already part of each message's index context (``ingest/context.py``), so the following live message(s) of
the same thread (else channel), within :data:`NEIGHBOUR_MAX_GAP` (a reply, not a channel's next
topic days later), of the top :data:`NEIGHBOUR_SEEDS` hits join the ranking at
:data:`NEIGHBOUR_FACTOR` × the seed's score — bounded: a neighbour never outranks its own seed, at most
:data:`NEIGHBOUR_WINDOW` per seed, and a neighbour the first round already ranked keeps the better of its
two scores.

ACL: a neighbour is a passage like any other and is fetched under the same :class:`SearchScope` (viewer,
workspace, filters, tombstones) as the arms; the "next message" is the next one the viewer can see, so a
message outside the viewer's principals is neither returned nor decides which message is next.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any

import asyncpg

from retriever.hits import Hit, RankedHit
from retriever.query_levers import apply_levers, join_names
from retriever.rows import ChunkRow, fetch_chunks, per_chunk
from retriever.scope import SearchScope, scope_where
from retriever.terms import STOPWORDS

ENABLED = True
"""Whether the product's ``full`` arm runs the second round (baselines never do)."""
AUTHOR_BOOST = 1.5
"""Score factor of a hit whose author is named in the question."""
WHEN_BOOST = 1.3
"""Score factor, in a when-question, of a hit whose text carries a time expression."""

NEIGHBOUR_SEEDS = 5
"""How many of the first round's top hits seed neighbours."""
NEIGHBOUR_WINDOW = 1
"""Following messages taken after a seed (the preceding one is already in the seed's index context)."""
NEIGHBOUR_MAX_GAP = timedelta(minutes=30)
"""A neighbour is at most this far in time from its seed: a reply; a channel's next post days later is not."""
NEIGHBOUR_FACTOR = 0.5
"""A neighbour's score = this × its seed's score (< 1: it never outranks its seed)."""


@dataclass(frozen=True, slots=True)
class Neighbour:
    seed: str
    chunk_id: str
    direction: int  # -1 preceding, +1 following


async def thread_neighbours(
    conn: asyncpg.Connection,
    scope: SearchScope,
    seeds: Sequence[str],
    following: int = NEIGHBOUR_WINDOW,
    preceding: int = 0,
    max_gap: timedelta = NEIGHBOUR_MAX_GAP,
) -> list[Neighbour]:
    """Child chunks of the ``following`` next and ``preceding`` previous live messages of each seed's thread
    that the viewer can see, at most ``max_gap`` apart in time (``(event_time, id)`` order; same workspace and
    source system): a message the viewer cannot see is skipped over, and the neighbour's chunk is re-checked
    under the whole ``scope``."""
    if scope.matches_nothing or not seeds or (following < 1 and preceding < 1):
        return []
    w = scope_where(scope, "c")
    seed_arg = w.arg([uuid.UUID(s) for s in seeds], "::uuid[]")
    nxt, prv = w.arg(max(following, 0)), w.arg(max(preceding, 0))
    visible = w.arg(list(scope.viewer), "::text[]")
    gap = w.arg(max_gap)
    key = "coalesce({0}.thread_external_id, {0}.parent_external_id)"

    def side(direction: int, op: str, order: str, lim: str) -> str:
        return (
            f"(SELECT {direction} AS dir, nd.id FROM documents nd WHERE nd.workspace = s.workspace"
            f" AND {key.format('nd')} = s.th AND nd.kind = 'message' AND nd.deleted_at IS NULL"
            f" AND nd.principals && {visible} AND abs(extract(epoch FROM nd.event_time - s.event_time))"
            f" <= extract(epoch FROM {gap}::interval)"
            f" AND nd.source_system = s.source_system AND (nd.event_time, nd.id) {op} (s.event_time, s.did)"
            f" ORDER BY nd.event_time {order}, nd.id {order} LIMIT {lim})"
        )

    rows = await conn.fetch(
        "WITH s AS (SELECT sc.id AS seed, d.id AS did, d.workspace, d.source_system, d.event_time,"
        f" {key.format('d')} AS th FROM chunks sc JOIN documents d ON d.id = sc.document_id"
        f" WHERE sc.id = ANY({seed_arg}) AND d.kind = 'message' AND d.deleted_at IS NULL"
        f" AND {key.format('d')} IS NOT NULL)"
        " SELECT s.seed, n.dir, c.id FROM s CROSS JOIN LATERAL ("
        + side(1, ">", "ASC", nxt)
        + " UNION ALL "
        + side(-1, "<", "DESC", prv)
        + f") n JOIN chunks c ON c.document_id = n.id WHERE {w.sql()} ORDER BY s.seed, n.dir, c.ordinal",
        *w.params,
    )
    return [Neighbour(str(r["seed"]), str(r["id"]), int(r["dir"])) for r in rows]


def _scaled(rh: RankedHit, score: float, label: str, factor: float) -> RankedHit:
    """``rh`` at ``score``, with ``label: factor`` recorded among its boosts."""
    return RankedHit(rh.hit, score, rh.fused, rh.arm_ranks, MappingProxyType({**rh.boosts, label: factor}))


def _by_score(hits: Iterable[RankedHit]) -> list[RankedHit]:
    return sorted(hits, key=lambda rh: (-rh.score, rh.hit.chunk_id))


def merge_neighbours(
    ranked: Sequence[RankedHit],
    neighbours: Sequence[Neighbour],
    hits: Mapping[str, Hit],
    factor: float = NEIGHBOUR_FACTOR,
) -> list[RankedHit]:
    """``ranked`` (best first) with neighbours added at ``factor`` × their seed's score (pure).

    A neighbour already ranked keeps the higher of its own and its neighbour score; one without a ``Hit``
    (not fetched: vanished, not visible) is skipped. Content duplicates of a ranked hit are not added.
    Order: score descending, then chunk id (deterministic)."""
    by_id = {rh.hit.chunk_id: rh for rh in ranked}
    seen_hashes = {rh.hit.content_hash for rh in ranked}
    out = dict(by_id)
    for nb in neighbours:
        seed = by_id.get(nb.seed)
        hit = hits.get(nb.chunk_id)
        if seed is None or hit is None:
            continue
        score = seed.score * factor
        current = out.get(nb.chunk_id)
        if current is not None:
            if score > current.score:
                out[nb.chunk_id] = _scaled(current, score, "neighbour", factor)
            continue
        if hit.content_hash in seen_hashes:
            continue
        seen_hashes.add(hit.content_hash)
        out[nb.chunk_id] = RankedHit(
            hit, score, 0.0, MappingProxyType({"neighbour": 1}), MappingProxyType({"neighbour": factor})
        )
    return _by_score(out.values())


_WHEN_QUESTION = re.compile(
    r"^\W*(?:when|how long|since when|what (?:date|day|year|month|time|week)|which (?:date|day|year|month|week))\b",
    re.IGNORECASE,
)
_TIME_EXPRESSION = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|ago|last|next|recently|just|since|weekend|week|month|year|"
    r"morning|evening|afternoon|night|january|february|march|april|may|june|july|august|september|october|"
    r"november|december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec|monday|tuesday|wednesday|thursday|"
    r"friday|saturday|sunday|(?:19|20)\d\d|\d{1,2}(?:st|nd|rd|th))\b",
    re.IGNORECASE,
)
_WHO = re.compile(r"\bwho(?:m|se)?\b", re.IGNORECASE)
_NAME_TOKEN = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_WORD = re.compile(r"[A-Za-z]+")


def name_parts(display_name: str | None) -> frozenset[str]:
    """The capitalised parts of a display name that can name its person in a question ("Dana", "Whitfield"):
    at least two letters, not a stopword, the email of ``"Dana W <dana@x>"`` ignored."""
    if not display_name:
        return frozenset()
    plain = display_name.split("<", 1)[0]
    parts = (t.strip("'’-") for t in _NAME_TOKEN.findall(plain))
    return frozenset(p for p in parts if len(p) >= 2 and p[0].isupper() and p.lower() not in STOPWORDS)


def named_in(query: str, display_name: str | None) -> bool:
    """True when a capitalised word of ``query`` ("Omar's" counts as "Omar") is a part of the author's name."""
    parts = name_parts(display_name)
    return bool(parts) and any(w in parts for w in _WORD.findall(query) if w[0].isupper())


def boost_named_authors(
    ranked: Sequence[RankedHit], authors: Mapping[str, str], query: str, factor: float = AUTHOR_BOOST
) -> tuple[list[RankedHit], int]:
    """``ranked`` with the hits of authors named in ``query`` multiplied by ``factor``, re-sorted (pure);
    also the number of boosted hits. A who-question ("who reports to Lee?", "who covered while Omar was
    away?") asks for another person: the named one anchors the relation and is not its speaker, no boost."""
    if _WHO.search(query):
        factor = 1.0
    out: list[RankedHit] = []
    boosted = 0
    for rh in ranked:
        if factor != 1.0 and named_in(query, authors.get(rh.hit.chunk_id)):
            rh = _scaled(rh, rh.score * factor, "author", factor)
            boosted += 1
        out.append(rh)
    return _by_score(out), boosted


def is_when_question(query: str) -> bool:
    """ "When did …", "How long …", "What year …": the question asks for a time."""
    return bool(_WHEN_QUESTION.search(query[:500]))


def has_time_expression(text: str) -> bool:
    return bool(_TIME_EXPRESSION.search(text[:4000]))


def boost_time_expressions(
    ranked: Sequence[RankedHit], query: str, factor: float = WHEN_BOOST
) -> tuple[list[RankedHit], int]:
    """In a when-question, hits whose text carries a time expression × ``factor``, re-sorted (pure); other
    questions unchanged. Also the number of boosted hits."""
    if factor == 1.0 or not is_when_question(query):
        return list(ranked), 0
    out: list[RankedHit] = []
    boosted = 0
    for rh in ranked:
        if has_time_expression(rh.hit.text):
            rh = _scaled(rh, rh.score * factor, "when", factor)
            boosted += 1
        out.append(rh)
    return _by_score(out), boosted


async def author_names(conn: asyncpg.Connection, chunk_ids: Sequence[str]) -> dict[str, str]:
    """Display names of the authors of ``chunk_ids`` (chunks already fetched under the viewer's scope): the
    resolved person's name, else the name the connector sent (``documents.author_name``)."""
    return await per_chunk(
        conn, chunk_ids, "coalesce(p.display_name, d.author_name)", "LEFT JOIN people p ON p.id = c.author_person_id"
    )


@dataclass
class SecondRound:
    ranked: list[RankedHit]
    rows: dict[str, ChunkRow]
    diagnostics: dict[str, Any] = field(default_factory=dict)


async def second_round(
    conn: asyncpg.Connection,
    scope: SearchScope,
    query: str,
    ranked: Sequence[RankedHit],
    rows: Mapping[str, ChunkRow],
    make_hit: Callable[[ChunkRow], Hit],
    *,
    seeds: int | None = None,
    window: int | None = None,
    factor: float | None = None,
    author_boost: float | None = None,
    when_boost: float | None = None,
) -> SecondRound:
    """The search around the question's names joined in (:func:`retriever.query_levers.join_names`), author
    match over ``ranked``, then the following thread neighbours of the top ``seeds`` hits
    (fetched under ``scope``: the viewer's ACL and filters) merged at ``factor`` × their seed's score, then
    the time-expression boost of a when-question, then the query-understanding levers
    (:func:`retriever.query_levers.apply_levers`). Unset knobs read the module's values at call time."""
    seeds = NEIGHBOUR_SEEDS if seeds is None else seeds
    window = NEIGHBOUR_WINDOW if window is None else window
    factor = NEIGHBOUR_FACTOR if factor is None else factor
    author_boost = AUTHOR_BOOST if author_boost is None else author_boost
    when_boost = WHEN_BOOST if when_boost is None else when_boost
    authors = await author_names(conn, [rh.hit.chunk_id for rh in ranked])
    people = {part for name in authors.values() for part in name_parts(name)}
    ranked, out_rows, joined = await join_names(conn, scope, query, ranked, rows, make_hit, people)
    if joined:
        authors = await author_names(conn, [rh.hit.chunk_id for rh in ranked])
    if author_boost == 1.0:
        authors = {}
    boosted, n_boosted = boost_named_authors(ranked, authors, query, author_boost)
    neighbours = await thread_neighbours(conn, scope, [rh.hit.chunk_id for rh in boosted[:seeds]], window)
    missing = [n.chunk_id for n in neighbours if n.chunk_id not in out_rows]
    if missing:
        out_rows.update(await fetch_chunks(conn, scope, list(dict.fromkeys(missing))))
    hits = {n.chunk_id: make_hit(out_rows[n.chunk_id]) for n in neighbours if n.chunk_id in out_rows}
    merged = merge_neighbours(boosted, neighbours, hits, factor)
    added = len(merged) - len(boosted)
    timed, n_when = boost_time_expressions(merged, query, when_boost)
    final, levers = await apply_levers(conn, query, timed)
    levers["joined"] = joined
    diag = {"author_boosted": n_boosted, "neighbours": added, "when_boosted": n_when, "query": levers}
    return SecondRound(final, out_rows, diag)
