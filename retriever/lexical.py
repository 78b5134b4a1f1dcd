"""Lexical (Okapi BM25 over Postgres full-text lexemes) arm of hybrid passage search, with its pseudo-relevance
feedback round; the SQL side (statistics reads, candidates, scoring). The pure maths is :mod:`retriever.lexical_math`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from retriever import lexical_math
from retriever.lexical_math import (
    LexemeStats,
    mcv_shares,
    prf_expansion,
    rare_first,
)
from retriever.scope import SearchScope, filtered, scope_where


@dataclass(frozen=True, slots=True)
class LexicalResult:
    """BM25 hits best first with their raw scores, and how they were found (``bm25``, ``no_terms``…)."""

    ids: list[str]
    scores: dict[str, float]
    note: str
    plain: LexicalResult | None = None
    """With feedback: the first (plain BM25) round, for a caller whose ranking profile does not use PRF."""


BM25_K1 = 0.9
BM25_B = 0.4
BM25_MAX_TERMS = 32
BM25_CANDIDATES = 4000
VISIBLE_CAP = 200_000


async def lexeme_stats(conn: asyncpg.Connection) -> LexemeStats | None:
    """``most_common_elems`` of ``chunks.tsv`` (and of ``chunks.principals``) in the current schema, or
    None before the first ANALYZE."""
    rows = await conn.fetch(
        "SELECT s.attname, s.most_common_elems::text::text[] AS elems, s.most_common_elem_freqs AS freqs,"
        " s.null_frac, greatest(c.reltuples, 0)::float8 AS reltuples FROM pg_stats s"
        " JOIN pg_class c ON c.relname = s.tablename AND c.relnamespace = to_regnamespace(s.schemaname)"
        " WHERE s.schemaname = current_schema() AND s.tablename = 'chunks' AND s.attname IN ('tsv', 'principals')"
    )
    by = {r["attname"]: r for r in rows}
    tsv = by.get("tsv")
    lex = mcv_shares(tsv["elems"], tsv["freqs"]) if tsv is not None else None
    if tsv is None or lex is None:
        return None
    acl = by.get("principals")
    who = mcv_shares(acl["elems"], acl["freqs"]) if acl is not None else None
    # parents have no tsvector: the live child chunks are about the non-null share of the table
    children = float(tsv["reltuples"]) * (1.0 - float(tsv["null_frac"] or 0.0))
    if who is None:
        return LexemeStats(lex[0], lex[1])
    return LexemeStats(lex[0], lex[1], who[0], who[1], children)


async def lexeme_counts(conn: asyncpg.Connection, scope: SearchScope, lexemes: Sequence[str]) -> LexemeStats:
    """Exact statistics of ``lexemes`` from the maintained counts (migration 0014), for ``scope``'s viewer:
    each lexeme's share of the workspace's live child chunks and the viewer's visible count. They change only
    when chunks do (never when ANALYZE runs); a lexeme no chunk holds has share 0."""
    row = await conn.fetchrow(
        "SELECT coalesce(sum(n), 0)::bigint AS total,"
        " coalesce(sum(n) FILTER (WHERE principals && $2::text[]), 0)::bigint AS visible"
        " FROM chunk_acl_counts WHERE workspace = $1",
        scope.workspace,
        list(scope.viewer),
    )
    total, visible = (int(row["total"]), int(row["visible"])) if row is not None else (0, 0)
    shares: dict[str, float] = {}
    if total > 0 and lexemes:
        rows = await conn.fetch(
            "SELECT lexeme, n FROM lexeme_counts WHERE workspace = $1 AND lexeme = ANY($2::text[]) AND n > 0",
            scope.workspace,
            list(dict.fromkeys(lexemes)),
        )
        shares = {r["lexeme"]: int(r["n"]) / total for r in rows}
    return LexemeStats(shares, 0.0, rows=float(total), visible_rows=visible)


async def lexical_arm(
    conn: asyncpg.Connection,
    scope: SearchScope,
    query: str,
    k: int,
    stats: LexemeStats | None = None,
    *,
    maintained: bool = False,
) -> LexicalResult:
    """Okapi BM25 (k1 0.9, b 0.4) over Postgres full-text lexemes, inside the viewer's scope.

    Postgres' ``ts_rank`` has no inverse document frequency, so a question's common words drown its
    rare ones. Here the query is normalised by the same ``english`` configuration as the index
    (stemming, stopwords) and each candidate is scored
    ``sum idf(t) * tf(t) * (k1 + 1) / (tf(t) + k1 * (1 - b + b * dl / avgdl))`` with ``tf`` from the
    tsvector positions, ``dl`` the number of lexemes and ``N`` the visible chunk count (:func:`visible_count`:
    exact from the maintained counts, or counted up to a cap under filters). Chunks are read from ``chunk_lexemes``,
    the narrow copy of the live child chunks (migration 0009).

    Candidates (GIN index) are the visible chunks matching the query's *rare* terms (``rare_first``
    over the lexeme statistics ``stats``; with ``maintained`` they are the exact maintained counts of
    :func:`lexeme_counts`, read for this query's terms, which the service uses): a common word ("team",
    "meeting") alone cannot make a chunk a top BM25 hit against chunks holding the rare ones, and matching it
    would touch a large share of the corpus. Their ``df`` is counted over the candidates; a common term that did not
    generate candidates still scores, with ``df`` estimated as share × N. Without statistics (a table
    never analysed) every term generates candidates and every ``df`` is counted. At most
    ``BM25_CANDIDATES`` candidates (best ``ts_rank`` first) are scored, bounding the cost.
    """
    if scope.matches_nothing:
        return LexicalResult([], {}, "empty_viewer")
    terms = await conn.fetchval("SELECT tsvector_to_array(to_tsvector('english', $1))", query)
    terms = list(terms or [])[:BM25_MAX_TERMS]
    if not terms:
        return LexicalResult([], {}, "no_terms")
    if maintained:
        stats = await lexeme_counts(conn, scope, terms)
    return await bm25(conn, scope, terms, k, stats)


def any_of(lexemes: Sequence[str]) -> str:
    """A tsquery literal matching any of ``lexemes`` verbatim. Its input syntax does not re-parse them, as
    ``to_tsquery`` would (which turned a compound lexeme such as ``sf-internal.slack.com/x`` into a phrase of
    its parts, a slower GIN scan with rechecks)."""
    return " | ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in lexemes)


async def visible_count(conn: asyncpg.Connection, scope: SearchScope, stats: LexemeStats | None) -> int:
    """BM25's ``N``: the chunks the scope can see. Estimated from the principal statistics when the scope
    is the ACL alone (counting 18k visible rows of 100k cost 30-110 ms a query); counted, up to
    ``VISIBLE_CAP``, when filters narrow it or there are no statistics. Only idf uses it: which chunks
    may be returned is decided by the ACL inside the query, never by this number."""
    estimate = stats.visible(scope.viewer) if stats is not None and not filtered(scope) else None
    if estimate is not None:
        return estimate
    w = scope_where(scope, live=True)
    visible = await conn.fetchval(
        f"SELECT count(*) FROM (SELECT 1 FROM chunk_lexemes WHERE {w.sql()} LIMIT {w.arg(VISIBLE_CAP)}) v",
        *w.params,
    )
    return int(visible or 0)


async def bm25(
    conn: asyncpg.Connection,
    scope: SearchScope,
    terms: Sequence[str],
    k: int,
    stats: LexemeStats | None = None,
    weights: Sequence[float] | None = None,
    candidates: int | None = None,
) -> LexicalResult:
    """BM25 of already normalised lexemes ``terms`` (see :func:`lexical_arm`); ``weights`` (default 1.0
    each) multiply each term's contribution — the expanded query of pseudo-relevance feedback."""
    terms = list(terms)
    tw = list(weights) if weights is not None else [1.0] * len(terms)
    visible = await visible_count(conn, scope, stats)
    budget = BM25_CANDIDATES if candidates is None else candidates
    generating = rare_first(terms, stats, visible, budget)
    estimated = [t for t in terms if t not in generating]
    w = scope_where(scope, live=True)
    terms_arg = w.arg(terms, "::text[]")
    weights_arg = w.arg(tw, "::float8[]")
    anyq = w.arg(any_of(generating), "::tsquery")
    gen_arg = w.arg(generating, "::text[]")
    est_terms = w.arg(estimated, "::text[]")
    est_df = w.arg([stats.share(t) * visible if stats else 0.0 for t in estimated], "::float8[]")
    cap = w.arg(budget)
    n = w.arg(max(visible, 1))
    lim = w.arg(k)
    k1, b = BM25_K1, BM25_B
    # chunk_lexemes (migration 0009): the narrow copy of the live child chunks' ACL, filters and tsvector.
    # The per-term sum is ordered by lexeme: float addition in plan order (hash vs sort aggregate, which a
    # fresh ANALYZE may switch) moved tied chunks past each other by a last-bit difference
    rows = await conn.fetch(
        f"WITH q AS (SELECT {anyq} AS q),"
        f" cand AS MATERIALIZED (SELECT id, tsv, dl FROM chunk_lexemes, q WHERE tsv @@ q.q AND {w.sql()}"
        f"   ORDER BY ts_rank(tsv, q.q) DESC, id LIMIT {cap}),"
        # only the query's lexemes are unnested: setweight marks them A (everything else D) and ts_filter keeps
        # them, in C; unnesting all of a chunk's ~40 lexemes to filter them in SQL cost 3x as much
        f" tf AS (SELECT c.id, c.dl, u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf FROM cand c,"
        f"   unnest(ts_filter(setweight(setweight(c.tsv, 'D'), 'A', {terms_arg}), '{{a}}')) u),"
        f" df AS (SELECT lexeme, count(*)::float8 AS df FROM tf WHERE lexeme = ANY({gen_arg}) GROUP BY lexeme"
        f"   UNION ALL SELECT e.lexeme, e.df FROM unnest({est_terms}, {est_df}) AS e(lexeme, df)),"
        f" avgdl AS (SELECT greatest(avg(dl), 1) AS avgdl FROM cand),"
        f" tw AS (SELECT * FROM unnest({terms_arg}, {weights_arg}) AS t(lexeme, weight))"
        f" SELECT tf.id, sum(tw.weight * ln(1 + (greatest({n}, df.df) - df.df + 0.5) / (df.df + 0.5))"
        f"   * tf.tf * {k1 + 1} / (tf.tf + {k1} * (1 - {b} + {b} * tf.dl / avgdl.avgdl)) ORDER BY lexeme) AS score"
        f" FROM tf JOIN df USING (lexeme) JOIN tw USING (lexeme), avgdl"
        f" GROUP BY tf.id ORDER BY score DESC, tf.id LIMIT {lim}",
        *w.params,
    )
    note = "bm25" if not estimated else f"bm25 (candidates from {len(generating)} of {len(terms)} terms)"
    return LexicalResult([str(r["id"]) for r in rows], {str(r["id"]): float(r["score"]) for r in rows}, note)


async def lexical_arm_prf(
    conn: asyncpg.Connection,
    scope: SearchScope,
    query: str,
    k: int,
    stats: LexemeStats | None = None,
    *,
    maintained: bool = False,
) -> LexicalResult:
    """:func:`lexical_arm`, then one feedback round: the query expanded by :func:`prf_expansion` (with
    ``maintained``, the shares of the feedback documents' lexemes are read from the maintained counts)."""
    first = await lexical_arm(conn, scope, query, k, stats, maintained=maintained)
    if len(first.ids) < 2:
        return first
    top = first.ids[: lexical_math.PRF_DOCS]
    rows = await conn.fetch(
        "SELECT c.id, c.dl, array_agg(u.lexeme) AS lex, array_agg(coalesce(array_length(u.positions, 1), 1)) AS tf"
        " FROM chunk_lexemes c, unnest(c.tsv) u WHERE c.id = ANY($1::uuid[]) GROUP BY c.id, c.dl",
        [uuid.UUID(i) for i in top],
    )
    docs = [
        (first.scores.get(str(r["id"]), 0.0), list(zip(r["lex"], r["tf"], strict=True)), int(r["dl"])) for r in rows
    ]
    terms = await conn.fetchval("SELECT tsvector_to_array(to_tsvector('english', $1))", query)
    terms = list(terms or [])[:BM25_MAX_TERMS]
    if maintained:
        stats = await lexeme_counts(conn, scope, [*terms, *(lex for _, ls, _ in docs for lex, _ in ls)])
    extra = prf_expansion(docs, terms, stats, max_terms=lexical_math.PRF_TERMS, weight=lexical_math.PRF_WEIGHT)
    if not extra:
        return first
    second = await bm25(
        conn,
        scope,
        [*terms, *(t for t, _ in extra)],
        k,
        stats,
        [1.0] * len(terms) + [w for _, w in extra],
        None if stats is None else lexical_math.PRF_CANDIDATES,
    )
    return LexicalResult(second.ids, second.scores, f"{second.note} + prf {len(extra)} terms", first)
