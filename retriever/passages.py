"""Passage search along its arms: dense (pgvector), lexical (BM25 over Postgres full-text, optional PRF),
relational (the graph channel), the semantic re-score of every text candidate, one fetch of the fused
candidates under the same ACL, pure ``fuse_and_rank``, optional rerank. Each arm runs on its own pooled
connection, concurrently; every step is timed (diagnostics, metrics, a span per arm)."""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import asyncpg

from retriever import kind_rank, lexical_math, multihop, windows
from retriever.compose import ARM_PRESETS, TimeAxes, fusion_diagnostics, relax_planner_bounds
from retriever.dense import (
    DEFAULT_EF_SEARCH,
    DEFAULT_EXACT_THRESHOLD,
    DenseConfig,
    DenseResult,
    dense_arm,
    pgvector_version,
    score_by_vector,
)
from retriever.graph.channel import RelationalResult, relational_arm
from retriever.hits import Hit, RankedHit
from retriever.learned_rank import Candidate, LearnedRanker
from retriever.lexical import LexicalResult, lexeme_counts, lexical_arm, lexical_arm_prf
from retriever.ranking import fuse_and_rank
from retriever.rows import ChunkRow, fetch_chunks, resolve_author
from retriever.scope import SearchScope, filtered
from schemas.tools import PassageFilters
from services import tracing
from services.embedding_config import EmbeddingConfig
from services.hierarchy import OrgHierarchy
from services.metrics import RETRIEVAL_ARM_SECONDS
from services.ports import Embedder, Reranker
from services.viewer import Principals

T = TypeVar("T")


@dataclass
class PassageSearch:
    ranked: list[RankedHit]
    rows: dict[str, ChunkRow]
    scores: dict[str, float]
    diagnostics: dict[str, Any]
    relational: RelationalResult = field(default_factory=RelationalResult)


@dataclass
class _ArmsFound:
    """What the arms returned: ids best first and raw scores per arm, their diagnostics, the relational result."""

    relational: RelationalResult
    ids: dict[str, list[str]] = field(default_factory=dict)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    plain_lexical: LexicalResult | None = None
    """The lexical arm's first round when it ran feedback (a profile without PRF ranks with it)."""


class PassageSearcher:
    def __init__(
        self,
        *,
        pool: asyncpg.Pool,
        hierarchy: OrgHierarchy,
        embedder: Embedder | None,
        embedding: EmbeddingConfig,
        reranker: Reranker | None = None,
        ef_search: int = DEFAULT_EF_SEARCH,
        exact_threshold: int = DEFAULT_EXACT_THRESHOLD,
    ) -> None:
        self.pool = pool
        self.hierarchy = hierarchy
        self.embedder = embedder
        self.embedding = embedding
        self.reranker = reranker
        self.learned: LearnedRanker | None = None
        """The optional learned ranker of the ``full`` arm (``retriever/learned_rank.py``; set by the wiring)."""
        self.ef_search = ef_search
        self.exact_threshold = exact_threshold
        self._pgvector: tuple[int, ...] | None = None

    async def pgvector(self) -> tuple[int, ...]:
        if self._pgvector is None:
            async with self.pool.acquire() as conn:
                self._pgvector = await pgvector_version(conn)
        return self._pgvector

    async def _timed(self, timings: dict[str, float], name: str, fn: Callable[[], Awaitable[T]]) -> T:
        start, wall = time.perf_counter(), time.time()
        try:
            return await fn()
        finally:
            elapsed = time.perf_counter() - start
            timings[name] = round(elapsed * 1000, 2)
            RETRIEVAL_ARM_SECONDS.labels(name).observe(elapsed)
            tracing.record_span(f"retrieve.{name}", wall, wall + elapsed, arm=name)

    async def _query_vector(self, query: str, timings: dict[str, float]) -> list[float] | None:
        if self.embedder is None:
            return None
        embedder = self.embedder
        # queries, not passages: asymmetric models (BGE) prefix their search instruction
        vectors: list[list[float]] = await self._timed(timings, "embed", lambda: embedder.embed_queries([query]))
        return vectors[0]

    async def _dense_config(self) -> DenseConfig:
        return DenseConfig(
            self.embedding.model, self.embedding.dim, await self.pgvector(), self.ef_search, self.exact_threshold
        )

    async def _semantic(
        self, scope: SearchScope, vector: list[float] | None, candidates: Sequence[str]
    ) -> dict[str, float]:
        """The ``semantic`` step: exact cosine of every text-arm candidate, so fusion has a dense
        score for the lexical hits the dense arm did not return."""
        if vector is None or not candidates:
            return {}
        cfg = await self._dense_config()
        async with self.pool.acquire() as conn:
            return await score_by_vector(conn, scope, vector, candidates, cfg)

    async def _dense(
        self, scope: SearchScope, vector: list[float] | None, k: int, timings: dict[str, float]
    ) -> DenseResult:
        if vector is None:
            return DenseResult([], "no_embedder")
        cfg = await self._dense_config()
        async with self.pool.acquire() as conn:
            # the exact visible count (maintained, migration 0014) ignores filters (sources, kinds, dates,
            # people): with any of them the probe counts
            estimate = None if filtered(scope) else (await lexeme_counts(conn, scope, [])).visible_rows
            return await dense_arm(conn, scope, vector, cfg, k, estimate)

    async def _lexical(self, scope: SearchScope, query: str, k: int, prf: bool = False) -> LexicalResult:
        arm = lexical_arm_prf if prf else lexical_arm
        async with self.pool.acquire() as conn:
            # exact maintained counts, read per query: never the planner's statistics, which change when
            # ANALYZE runs (issue 26)
            return await arm(conn, scope, query, k, maintained=True)

    async def _fetch(self, scope: SearchScope, ids: Sequence[str]) -> dict[str, ChunkRow]:
        async with self.pool.acquire() as conn:
            return await fetch_chunks(conn, scope, ids)

    async def _relational(self, scope: SearchScope, query: str) -> RelationalResult:
        if scope.matches_nothing:
            return RelationalResult(notes={"relational": "empty viewer"})
        async with self.pool.acquire() as conn:
            return await relational_arm(conn, workspace=scope.workspace, viewer=scope.viewer, query=query)

    async def search(
        self,
        *,
        query: str,
        workspace: str,
        filters: PassageFilters,
        limit: int,
        arms: str,
        viewer: Principals,
        own: Sequence[str],
        axes: TimeAxes,
        now: datetime,
        author_ids: tuple[uuid.UUID, ...] | None = None,
        participant_ids: tuple[uuid.UUID, ...] | None = None,
    ) -> PassageSearch:
        """:meth:`search_once`; when a date the planner read from the query (never the host's filters) leaves
        no passage, once more without it, the date's period only boosting (``temporal_relaxed``): a typed
        date is a hint, and a hard cut-off that empties the answer throws the evidence away (issue 26)."""
        once = functools.partial(
            self.search_once,
            query=query,
            workspace=workspace,
            filters=filters,
            limit=limit,
            arms=arms,
            viewer=viewer,
            own=own,
            now=now,
            author_ids=author_ids,
            participant_ids=participant_ids,
        )
        found = await once(axes=axes)
        relaxed = relax_planner_bounds(axes, filters)
        if found.ranked or relaxed is None:
            return found
        again = await once(axes=relaxed)
        again.diagnostics["temporal_relaxed"] = True
        return again

    async def search_once(
        self,
        *,
        query: str,
        workspace: str,
        filters: PassageFilters,
        limit: int,
        arms: str,
        viewer: Principals,
        own: Sequence[str],
        axes: TimeAxes,
        now: datetime,
        author_ids: tuple[uuid.UUID, ...] | None = None,
        participant_ids: tuple[uuid.UUID, ...] | None = None,
    ) -> PassageSearch:
        timings: dict[str, float] = {}
        scope = await self._scope(workspace, filters, viewer, axes, author_ids, participant_ids)
        names, config = ARM_PRESETS[arms]
        wants_vector = "dense" in names or "semantic" in names
        vector = await self._query_vector(query, timings) if wants_vector and not scope.matches_nothing else None
        prf = arms == "full" and lexical_math.PRF_ENABLED
        found = await self._arms(scope, query, vector, names, min(100, max(40, 4 * limit)), prf, timings)
        arm_ids, arm_scores, arm_diag = found.ids, found.scores, found.diagnostics
        # the semantic step only re-scores ids the arms already returned, so the candidates are known now and
        # their rows are fetched on another connection while it runs
        plain = found.plain_lexical.ids if found.plain_lexical else []
        candidates = list(dict.fromkeys([*(i for ids in arm_ids.values() for i in ids), *plain]))
        # the dense arm re-scored over every text candidate: its ids in similarity order, with scores
        pool = [*arm_ids.get("dense", []), *arm_ids.get("lexical", []), *plain]  # score_by_vector de-duplicates
        semantic, rows = await asyncio.gather(
            self._timed(timings, "semantic", lambda: self._semantic(scope, vector, pool))
            if "semantic" in names
            else asyncio.sleep(0, {}),
            self._timed(timings, "fetch", lambda: self._fetch(scope, candidates)),
        )
        if semantic:
            added = len(set(semantic) - set(arm_ids.get("dense", [])))
            arm_ids["dense"] = list(semantic)
            arm_scores["dense"] = semantic
            arm_diag["semantic"] = {"scored": len(semantic), "added_to_dense": added}

        def make_hit(r: ChunkRow) -> Hit:
            scope_name = self.hierarchy.scope_of(r.principals, own)
            return Hit(
                r.chunk_id, r.document_id, r.content_hash, r.title, r.text, r.event_time, scope_name, r.access_count
            )

        profile, config = kind_rank.apply(arms == "full", [r.kind for r in rows.values()], config, found)
        hits = {cid: make_hit(r) for cid, r in rows.items()}
        result = fuse_and_rank(
            *(arm_ids, hits, query, now, config),
            arm_scores=arm_scores,
            boost_range=axes.boost_range,
            keep_at_least=limit,
        )
        diag: dict[str, Any] = {
            "arms": arm_diag,
            "fusion": fusion_diagnostics(result.diagnostics, set(rows)),
            "timings_ms": timings,
            **({"kind_profile": profile.name} if profile is not None else {}),
        }
        second_round = arms == "full" and multihop.ENABLED and (profile is None or profile.second_round)
        ranked, rows, scores = await self._refine(
            scope, query, list(result.hits), rows, make_hit, limit, second_round, timings, diag, arm_scores, arms
        )
        if arms == "full" and windows.ENABLED:
            diag["windows"] = await self._windows(scope, ranked[:limit], rows, timings) if ranked else {}
        return PassageSearch(ranked[:limit], rows, scores, diag, found.relational)

    async def _scope(
        self,
        workspace: str,
        filters: PassageFilters,
        viewer: Principals,
        axes: TimeAxes,
        author_ids: tuple[uuid.UUID, ...] | None,
        participant_ids: tuple[uuid.UUID, ...] | None,
    ) -> SearchScope:
        """The search's scope: viewer, workspace, filters and time axes (a named author resolved as the viewer)."""
        if filters.author:
            async with self.pool.acquire() as conn:
                author_ids = await resolve_author(conn, workspace, filters.author, viewer)
        return SearchScope(
            workspace,
            viewer,
            tuple(filters.source_systems),
            tuple(filters.kinds),
            axes.date_from,
            axes.date_to,
            axes.as_of,
            author_ids,
            axes.believed_as_of,
            participant_ids,
        )

    async def _windows(
        self, scope: SearchScope, top: Sequence[RankedHit], rows: dict[str, ChunkRow], timings: dict[str, float]
    ) -> dict[str, windows.Window]:
        """The conversation window of each returned hit (``retriever/windows.py``), under ``scope``."""
        ids = [rh.hit.chunk_id for rh in top]
        async with self.pool.acquire() as conn:
            return await self._timed(timings, "windows", lambda: windows.windows(conn, scope, ids, rows))

    async def _arms(
        self,
        scope: SearchScope,
        query: str,
        vector: list[float] | None,
        names: Collection[str],
        k: int,
        prf: bool,
        timings: dict[str, float],
    ) -> _ArmsFound:
        """The dense, lexical and relational arms named in ``names``, concurrently, each timed."""
        empty: Any = None
        dense, lexical, relational = await asyncio.gather(
            self._timed(timings, "dense", lambda: self._dense(scope, vector, k, timings))
            if "dense" in names
            else asyncio.sleep(0, empty),
            self._timed(timings, "lexical", lambda: self._lexical(scope, query, k, prf))
            if "lexical" in names
            else asyncio.sleep(0, empty),
            self._timed(timings, "relational", lambda: self._relational(scope, query))
            if "relational" in names
            else asyncio.sleep(0, empty),
        )
        found = _ArmsFound(relational=relational or RelationalResult())
        if dense is not None:
            found.ids["dense"] = dense.ids
            found.diagnostics["dense"] = {
                "count": len(dense.ids),
                "strategy": dense.strategy,
                "ef_search": dense.ef_search,
                "visible_probe": dense.probe,
            }
        if lexical is not None:
            found.ids["lexical"] = lexical.ids
            found.scores["lexical"] = lexical.scores
            found.plain_lexical = lexical.plain
            found.diagnostics["lexical"] = {"count": len(lexical.ids), "query": lexical.note}
        if "relational" in names:
            rel = found.relational
            found.ids["relational"] = rel.chunk_ids
            found.diagnostics["relational"] = {"count": len(rel.chunk_ids), "parsed": rel.parsed, **rel.notes}
        return found

    async def _refine(
        self,
        scope: SearchScope,
        query: str,
        ranked: list[RankedHit],
        rows: dict[str, ChunkRow],
        make_hit: Callable[[ChunkRow], Hit],
        limit: int,
        second_round: bool,
        timings: dict[str, float],
        diag: dict[str, Any],
        arm_scores: Mapping[str, Mapping[str, float]],
        arms: str,
    ) -> tuple[list[RankedHit], dict[str, ChunkRow], dict[str, float]]:
        """The multi-hop second round (when asked), the learned ranker (``full``, when a model is loaded) and the
        reranker (when set and there are more than ``limit``); their diagnostics go into ``diag``."""
        scores = {rh.hit.chunk_id: rh.score for rh in ranked}
        if second_round and ranked:
            async with self.pool.acquire() as conn:
                second = await self._timed(
                    timings, "second_round", lambda: multihop.second_round(conn, scope, query, ranked, rows, make_hit)
                )
            ranked, rows = second.ranked, second.rows
            scores = {rh.hit.chunk_id: rh.score for rh in ranked}
            diag["second_round"] = second.diagnostics
        if self.learned is not None and arms == "full" and len(ranked) > 1:
            cands = {cid: Candidate(r.kind, r.text, r.external_id) for cid, r in rows.items()}
            ranked = self.learned.rerank(query, ranked, cands, arm_scores)
            scores = {rh.hit.chunk_id: rh.score for rh in ranked}
            diag["learned_ranker"] = self.learned.version
        if self.reranker is not None and len(ranked) > limit:
            texts = [rows[rh.hit.chunk_id].text for rh in ranked]
            order = await self._timed(timings, "rerank", lambda: self.reranker.rerank(query, texts))  # type: ignore[union-attr]
            ranked = [ranked[i] for i, _ in order]
            scores = {ranked[n].hit.chunk_id: s for n, (_, s) in enumerate(order)}
            diag["rerank"] = {"shortlist": len(texts)}
        return ranked, rows, scores
