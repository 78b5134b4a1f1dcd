"""SQL arms of hybrid passage search (asyncpg). ACL, tombstones and filters sit inside every query.

ACL (any-visible): ``principals && $viewer::text[]`` over the viewer's *expanded* principals; an empty
viewer matches nothing, so the arms return early without touching the database.

Dense arm on pgvector < 0.8 (no iterative index scans): a filtered HNSW scan yields at most
``ef_search`` candidates *before* the filter, so a selective ACL leaves too few rows. Strategy:

1. probe: count the viewer-visible vectors, bounded at ``exact_threshold`` (cheap: GIN on principals);
2. fewer than the threshold -> exact search over the materialised visible set (no index);
3. otherwise HNSW with ``SET LOCAL hnsw.ef_search`` raised and over-fetching ``ef_search`` rows;
   if the filter still leaves fewer than ``k`` rows, fall back to exact search.

On pgvector >= 0.8, step 3 is one HNSW scan with ``hnsw.iterative_scan = relaxed_order`` instead (the probe and
the exact path for small visible sets stay).
The HNSW query must use the index's expression and predicate verbatim: ``(embedding::vector(dim))``
and ``embedding_model = '<literal>' AND NOT is_parent`` (a bind parameter would not match the
partial index).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from retriever.access import decayed_weight_sql
from services.db.vectors import sql_literal, vector_expr
from services.sources import alias_visible_sql
from services.viewer import Principals

DEFAULT_EF_SEARCH = 400
MAX_EF_SEARCH = 1000
DEFAULT_EXACT_THRESHOLD = 3000


@dataclass(frozen=True, slots=True)
class SearchScope:
    """Everything that restricts which child chunks an arm may return."""

    workspace: str
    viewer: Principals
    source_systems: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    date_from: datetime | None = None
    date_to: datetime | None = None
    as_of: datetime | None = None
    author_ids: tuple[uuid.UUID, ...] | None = None  # None = no author filter; () = unresolved -> nothing
    believed_as_of: datetime | None = None  # belief time: only documents whose current version we held then
    participant_ids: tuple[uuid.UUID, ...] | None = None  # None = any; () = unresolved -> nothing

    @property
    def matches_nothing(self) -> bool:
        return (
            not self.viewer
            or (self.author_ids is not None and not self.author_ids)
            or (self.participant_ids is not None and not self.participant_ids)
        )


@dataclass
class Where:
    """A WHERE clause under construction with positional parameters."""

    params: list[Any] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)

    def arg(self, value: Any, cast: str = "") -> str:
        self.params.append(value)
        return f"${len(self.params)}{cast}"

    def add(self, sql: str) -> None:
        self.parts.append(sql)

    def sql(self) -> str:
        return " AND ".join(self.parts)


def scope_where(scope: SearchScope, alias: str = "", where: Where | None = None, *, live: bool = False) -> Where:
    """Child chunks, not tombstoned, in the workspace, visible to the viewer, within the filters.

    ``NOT is_parent AND NOT deleted`` come first and verbatim so the partial GIN indexes match; ``live``
    leaves them out for ``chunk_lexemes``, which holds live child chunks only (migration 0009).
    """
    a = f"{alias}." if alias else ""
    w = where or Where()
    if not live:
        w.add(f"NOT {a}is_parent AND NOT {a}deleted")
    w.add(f"{a}principals && {w.arg(list(scope.viewer), '::text[]')}")
    w.add(f"{a}workspace = {w.arg(scope.workspace)}")
    if scope.source_systems:
        w.add(f"{a}source_system = ANY({w.arg(list(scope.source_systems), '::text[]')})")
    if scope.kinds:
        w.add(f"{a}kind = ANY({w.arg(list(scope.kinds), '::text[]')})")
    if scope.date_from is not None:
        w.add(f"{a}event_time >= {w.arg(scope.date_from)}")
    if scope.date_to is not None:
        w.add(f"{a}event_time < {w.arg(scope.date_to)}")
    if scope.as_of is not None:
        w.add(f"{a}event_time <= {w.arg(scope.as_of)}")
    # a memory absorbed by a consolidation ranks no longer from its survivor's time on (migration 0013)
    ref = w.arg(scope.as_of) if scope.as_of is not None else "now()"
    w.add(f"NOT EXISTS (SELECT 1 FROM memory_hidden mh WHERE mh.chunk_id = {a}id AND mh.hidden_from <= {ref})")
    if scope.author_ids is not None:
        w.add(f"{a}author_person_id = ANY({w.arg(list(scope.author_ids), '::uuid[]')})")
    if scope.participant_ids is not None:  # the person takes part in the document (any role, author included)
        w.add(
            f"EXISTS (SELECT 1 FROM participants px WHERE px.document_id = {a}document_id"
            f" AND px.person_id = ANY({w.arg(list(scope.participant_ids), '::uuid[]')}))"
        )
    if scope.believed_as_of is not None:  # belief upper-bounds the document's updated_at
        w.add(
            f"EXISTS (SELECT 1 FROM documents bd WHERE bd.id = {a}document_id"
            f" AND bd.updated_at <= {w.arg(scope.believed_as_of)})"
        )
    return w


async def pgvector_version(conn: asyncpg.Connection) -> tuple[int, ...]:
    raw = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    if not raw:
        return (0,)
    return tuple(int(p) for p in str(raw).split(".") if p.isdigit())


@dataclass(frozen=True, slots=True)
class DenseResult:
    ids: list[str]
    strategy: str
    ef_search: int | None = None
    probe: int | None = None


@dataclass(frozen=True, slots=True)
class DenseConfig:
    model: str
    dim: int
    pgvector: tuple[int, ...]
    ef_search: int = DEFAULT_EF_SEARCH
    exact_threshold: int = DEFAULT_EXACT_THRESHOLD


def _dense_where(scope: SearchScope, cfg: DenseConfig) -> Where:
    w = scope_where(scope)
    w.add(f"embedding_model = {sql_literal(cfg.model)}")
    return w


async def dense_exact(
    conn: asyncpg.Connection, scope: SearchScope, vector: Sequence[float], cfg: DenseConfig, k: int
) -> list[str]:
    """Exact cosine top-k over the materialised visible set (the HNSW index cannot be used)."""
    w = _dense_where(scope, cfg)
    q = w.arg(list(vector), "::vector")
    lim = w.arg(k)
    rows = await conn.fetch(
        f"WITH vis AS MATERIALIZED (SELECT id, embedding FROM chunks WHERE {w.sql()})"
        f" SELECT id FROM vis ORDER BY embedding <=> {q}, id LIMIT {lim}",  # no cast: no index to match
        *w.params,
    )
    return [str(r["id"]) for r in rows]


async def _dense_hnsw(
    conn: asyncpg.Connection,
    scope: SearchScope,
    vector: Sequence[float],
    cfg: DenseConfig,
    fetch: int,
    ef: int,
    iterative: bool,
) -> list[str]:
    w = _dense_where(scope, cfg)
    q = w.arg(list(vector), "::vector")
    lim = w.arg(fetch)
    async with conn.transaction():
        await conn.execute(f"SET LOCAL hnsw.ef_search = {int(ef)}")
        # only index scans: the ordered HNSW scan is then the planner's only sensible choice
        await conn.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off")
        if iterative:
            await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        scan = f"SELECT id FROM chunks WHERE {w.sql()} ORDER BY {vector_expr(cfg.dim)} <=> {q} LIMIT {lim}"
        if iterative:  # relaxed_order may return slightly out-of-order rows: re-sort the (small) result
            scan = (
                f"SELECT id FROM (SELECT id, embedding <=> {q} AS dist FROM ({scan}) a"
                f" JOIN chunks USING (id)) s ORDER BY dist, id"
            )
        # otherwise keep the index order: computing distances here would detoast every vector again
        rows = await conn.fetch(scan, *w.params)
    return [str(r["id"]) for r in rows]


async def visible_vectors(conn: asyncpg.Connection, scope: SearchScope, cfg: DenseConfig, cap: int) -> int:
    """How many vectors the viewer may see, counted up to ``cap`` (bounded cost)."""
    w = _dense_where(scope, cfg)
    lim = w.arg(cap)
    n = await conn.fetchval(f"SELECT count(*) FROM (SELECT 1 FROM chunks WHERE {w.sql()} LIMIT {lim}) s", *w.params)
    return int(n or 0)


PROBE_SKIP_FACTOR = 4
"""The probe is skipped when the statistics estimate this many times ``exact_threshold`` visible chunks."""


async def dense_arm(
    conn: asyncpg.Connection,
    scope: SearchScope,
    vector: Sequence[float],
    cfg: DenseConfig,
    k: int,
    visible_estimate: int | None = None,
) -> DenseResult:
    """Top-``k`` visible vectors (see the module docstring). ``visible_estimate`` (the planner-statistics
    estimate of the viewer's chunks, :meth:`LexemeStats.visible`) far above ``exact_threshold`` skips the
    probe (14 ms at 100k chunks): the HNSW path still falls back to exact search if it finds fewer than ``k``."""
    if scope.matches_nothing:
        return DenseResult([], "empty_viewer")
    ef = min(MAX_EF_SEARCH, max(cfg.ef_search, k))
    probe: int | None = None
    if visible_estimate is None or visible_estimate < PROBE_SKIP_FACTOR * cfg.exact_threshold:
        probe = await visible_vectors(conn, scope, cfg, cfg.exact_threshold)
    if probe is not None and probe < cfg.exact_threshold:  # a small visible set: exact is cheap and exact
        return DenseResult(await dense_exact(conn, scope, vector, cfg, k), "exact", probe=probe)
    if cfg.pgvector >= (0, 8):
        # the same ef_search as the over-fetch path: ef 100 gave recall@10 0.85-0.91 under ACL filters at 100k
        # chunks of HERB text (target >= 0.95); the iterative scan then only fetches k rows
        ids = await _dense_hnsw(conn, scope, vector, cfg, k, ef, iterative=True)
        if len(ids) < k:  # the scan hit hnsw.max_scan_tuples before k visible rows
            return DenseResult(await dense_exact(conn, scope, vector, cfg, k), "hnsw_short_exact", ef, probe)
        return DenseResult(ids, "hnsw_iterative", ef_search=ef, probe=probe)
    ids = await _dense_hnsw(conn, scope, vector, cfg, ef, ef, iterative=False)
    if len(ids) < k:
        return DenseResult(await dense_exact(conn, scope, vector, cfg, k), "hnsw_short_exact", ef, probe)
    return DenseResult(ids[:k], "hnsw_overfetch", ef, probe)


async def score_by_vector(
    conn: asyncpg.Connection, scope: SearchScope, vector: Sequence[float], ids: Sequence[str], cfg: DenseConfig
) -> dict[str, float]:
    """Exact cosine similarity to the query for a candidate list (other arms' ids), best first.

    This is the ``semantic`` step: the dense model scores every fused candidate, so CC fusion sees a
    dense score for the lexical arm's hits too — a weak bi-encoder still adds signal as a re-scorer of
    lexical candidates that it lacks as a retriever. ACL and filters are re-applied."""
    if scope.matches_nothing or not ids:
        return {}
    w = Where()
    id_arg = w.arg([uuid.UUID(i) for i in dict.fromkeys(ids)], "::uuid[]")
    scope_where(scope, "", w)
    w.add(f"embedding_model = {sql_literal(cfg.model)}")
    q = w.arg(list(vector), "::vector")
    rows = await conn.fetch(
        f"SELECT id, 1 - (embedding <=> {q}) AS sim FROM chunks WHERE id = ANY({id_arg}) AND {w.sql()}"
        " ORDER BY sim DESC, id",
        *w.params,
    )
    return {str(r["id"]): float(r["sim"]) for r in rows}


@dataclass(frozen=True, slots=True)
class LexicalResult:
    """BM25 hits best first with their raw scores, and how they were found (``bm25``, ``no_terms``…)."""

    ids: list[str]
    scores: dict[str, float]
    note: str


BM25_K1 = 0.9
BM25_B = 0.4
BM25_MAX_TERMS = 32
BM25_CANDIDATES = 4000
VISIBLE_CAP = 200_000


@dataclass(frozen=True, slots=True)
class LexemeStats:
    """Planner statistics of ``chunks`` (``ANALYZE``): share of rows containing each common lexeme.

    ``unlisted`` bounds the share of any lexeme not in the list (the smallest listed share). With
    ``rows`` (estimated live child chunks) and ``principals`` (share of chunks carrying each common
    principal, ``principals_unlisted`` the bound for the others) it also estimates how many chunks a
    viewer sees (:meth:`visible`), the ``N`` of BM25's idf, without counting them per query."""

    shares: dict[str, float]
    unlisted: float
    principals: dict[str, float] = field(default_factory=dict)
    principals_unlisted: float = 0.0
    rows: float = 0.0
    visible_rows: int | None = None
    """Exact chunks visible to the viewer the statistics were read for (:func:`lexeme_counts`)."""

    def share(self, lexeme: str) -> float:
        return self.shares.get(lexeme, self.unlisted)

    def visible(self, viewer: Sequence[str]) -> int | None:
        """Chunks visible to ``viewer``: exact from the maintained counts, else estimated (Σ share of its
        principals × rows, at most rows; a chunk shared with two of them counts twice below that bound), or
        None without principal statistics."""
        if self.visible_rows is not None:
            return self.visible_rows
        if self.rows <= 0 or not self.principals:
            return None
        share = sum(self.principals.get(p, self.principals_unlisted) for p in set(viewer))
        return max(1, round(min(share, 1.0) * self.rows))


def _shares(elems: Sequence[str] | None, freqs: Sequence[float] | None) -> tuple[dict[str, float], float] | None:
    """``most_common_elems`` with their frequencies, and the bound for unlisted elements (the minimum)."""
    if not elems or not freqs or len(freqs) < len(elems) + 2:
        return None
    return dict(zip(elems, (float(f) for f in freqs), strict=False)), float(freqs[len(elems)])


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
    lex = _shares(tsv["elems"], tsv["freqs"]) if tsv is not None else None
    if tsv is None or lex is None:
        return None
    acl = by.get("principals")
    who = _shares(acl["elems"], acl["freqs"]) if acl is not None else None
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


def rare_first(terms: Sequence[str], stats: LexemeStats | None, visible: int, budget: int) -> list[str]:
    """The query terms that generate BM25 candidates: rarest first, while their expected visible
    matches (share × visible) stay within ``budget``; always at least the rarest one. Without
    statistics every term generates candidates."""
    if stats is None:
        return list(terms)
    chosen: list[str] = []
    expected = 0.0
    for term in sorted(terms, key=lambda t: (stats.share(t), t)):
        more = stats.share(term) * visible
        if chosen and expected + more > budget:
            break
        chosen.append(term)
        expected += more
    return chosen


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


def filtered(scope: SearchScope) -> bool:
    """Whether the scope narrows the viewer's chunks by more than the ACL (source, kind, time, people)."""
    return bool(
        scope.source_systems
        or scope.kinds
        or scope.date_from
        or scope.date_to
        or scope.as_of
        or scope.author_ids is not None
        or scope.participant_ids is not None
        or scope.believed_as_of
    )


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


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """A visible child chunk with its document fields and its parent's readable text."""

    chunk_id: str
    document_id: str
    content_hash: str
    title: str | None
    text: str
    parent_text: str | None
    event_time: datetime
    principals: tuple[str, ...]
    access_count: float
    """Decayed usage (``retriever/access.py``), not the plain total."""
    kind: str
    source_system: str
    external_id: str
    url: str | None


async def fetch_chunks(conn: asyncpg.Connection, scope: SearchScope, ids: Sequence[str]) -> dict[str, ChunkRow]:
    """Rows for ``ids`` that are still visible under ``scope`` (ACL re-checked; filters re-applied)."""
    if scope.matches_nothing or not ids:
        return {}
    w = Where()
    id_arg = w.arg([uuid.UUID(i) for i in ids], "::uuid[]")
    scope_where(scope, "c", w)
    rows = await conn.fetch(
        "SELECT c.id, c.document_id, c.content_hash, c.title, c.text, p.text AS parent_text, c.event_time,"
        f" c.principals, {decayed_weight_sql()} AS access_count, c.kind, c.source_system, d.external_id, d.url"
        " FROM chunks c JOIN documents d ON d.id = c.document_id LEFT JOIN chunks p ON p.id = c.parent_id"
        f" WHERE c.id = ANY({id_arg}) AND {w.sql()}",
        *w.params,
    )
    return {
        str(r["id"]): ChunkRow(
            chunk_id=str(r["id"]),
            document_id=str(r["document_id"]),
            content_hash=r["content_hash"],
            title=r["title"],
            text=r["text"],
            parent_text=r["parent_text"],
            event_time=r["event_time"],
            principals=tuple(r["principals"]),
            access_count=r["access_count"],
            kind=r["kind"],
            source_system=r["source_system"],
            external_id=r["external_id"],
            url=r["url"],
        )
        for r in rows
    }


async def resolve_author(
    conn: asyncpg.Connection, workspace: str, author: str, viewer: Sequence[str]
) -> tuple[uuid.UUID, ...]:
    """Author filter value -> person ids: a uuid is taken as is, an email is looked up in the aliases the
    viewer may resolve (all-visible over the alias's source documents, ``services.sources``): an email learnt
    only from a document the viewer cannot see resolves to nobody, as an unknown one does."""
    try:
        return (uuid.UUID(author),)
    except ValueError:
        pass
    if not viewer:
        return ()
    rows = await conn.fetch(
        "SELECT a.person_id, p.merged_into FROM person_aliases a JOIN people p ON p.id = a.person_id"
        f" WHERE a.workspace = $1 AND a.namespace = 'email' AND a.value = $2 AND {alias_visible_sql('$3')}",
        workspace,
        author.strip().lower(),
        list(viewer),
    )
    ids = {r["person_id"] for r in rows} | {r["merged_into"] for r in rows if r["merged_into"]}
    return tuple(sorted(ids))


async def write_audit(
    conn: asyncpg.Connection,
    *,
    workspace: str,
    viewer: str | None,
    tool: str,
    query_hash: str,
    returned_ids: Sequence[str],
    latency_ms: float,
    diagnostics: str | None,
    returned_documents: Sequence[uuid.UUID] = (),
) -> None:
    await conn.execute(
        "INSERT INTO retrieval_audit (workspace, viewer, tool, query_hash, returned_ids, latency_ms,"
        " diagnostics, returned_documents) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::uuid[])",
        workspace,
        viewer,
        tool,
        query_hash,
        list(returned_ids),
        latency_ms,
        diagnostics,
        list(dict.fromkeys(returned_documents)),
    )


PRF_ENABLED = True
"""Whether the product's ``full`` arm runs pseudo-relevance feedback (baselines never do); see the README."""
PRF_DOCS = 5
PRF_TERMS = 8
PRF_WEIGHT = 0.5
PRF_MAX_SHARE = 0.02
"""RM3-style pseudo-relevance feedback on the lexical arm: the top ``PRF_DOCS`` hits' lexemes, weighted
``Σ_d p(d) · tf/dl · ln(1/share)``, at most ``PRF_TERMS`` of them (never a query term, a number, a lexeme of
fewer than 3 letters or one in more than ``PRF_MAX_SHARE`` of the chunks), join the query at weight
``PRF_WEIGHT`` × (weight / best weight); the original terms keep weight 1."""
PRF_CANDIDATES = 2000
"""Candidate budget of the feedback round (rare-term generation and cap); overlap@10 with both rounds exact at
100k HERB chunks: 0.993 at 4,000, 0.981 at 2,000, 0.958 at 1,000 (60 queries; p50 91 / 76 / 62 ms, load 9)."""


def prf_expansion(
    docs: Sequence[tuple[float, Sequence[tuple[str, int]], int]],
    query_terms: Sequence[str],
    stats: LexemeStats | None,
    *,
    max_terms: int = PRF_TERMS,
    weight: float = PRF_WEIGHT,
    max_share: float = PRF_MAX_SHARE,
) -> list[tuple[str, float]]:
    """Expansion lexemes with weights from feedback ``docs`` = (score, [(lexeme, tf)], dl) (pure)."""
    total = sum(max(s, 0.0) for s, _, _ in docs)
    if total <= 0:
        return []
    skip = set(query_terms)
    acc: dict[str, float] = {}
    for score, lexemes, dl in docs:
        p_d = max(score, 0.0) / total
        for lex, tf in lexemes:
            if lex in skip or len(lex) < 3 or lex.isdigit():
                continue
            share = stats.share(lex) if stats is not None else 0.0
            if share > max_share:
                continue
            idf = math.log(1.0 / max(share, 1e-6))
            acc[lex] = acc.get(lex, 0.0) + p_d * tf / max(dl, 1) * idf
    best = sorted(acc.items(), key=lambda kv: (-kv[1], kv[0]))[:max_terms]
    if not best:
        return []
    top = best[0][1]
    return [(lex, weight * v / top) for lex, v in best]


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
    top = first.ids[:PRF_DOCS]
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
    extra = prf_expansion(docs, terms, stats, max_terms=PRF_TERMS, weight=PRF_WEIGHT)
    if not extra:
        return first
    second = await bm25(
        conn,
        scope,
        [*terms, *(t for t, _ in extra)],
        k,
        stats,
        [1.0] * len(terms) + [w for _, w in extra],
        None if stats is None else PRF_CANDIDATES,
    )
    return LexicalResult(second.ids, second.scores, f"{second.note} + prf {len(extra)} terms")
