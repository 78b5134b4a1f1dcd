"""``RetrieverService``: hybrid passage search and ``retrieve_context``, shared by HTTP and Kafka RPC.

Per call: expand the viewer's groups through the org hierarchy; run the arms concurrently (dense,
lexical, relational — each on its own connection, ACL inside SQL); fetch the fused candidates again
under the same ACL; rank with the pure ``fuse_and_rank``; rerank through the vendor when the
shortlist exceeds the limit; expand the graph channels; pack; optionally synthesize; write one
``retrieval_audit`` row. Diagnostics only ever name chunks the viewer can see.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import asyncpg

from retriever import repository as sql
from retriever.access import AccessRecorder
from retriever.compose import (
    ARM_PRESETS,
    TimeAxes,
    fact_text,
    fusion_diagnostics,
    pack_context,
    packing_diagnostics,
    path_text,
    plan_dict,
    resolve_time,
)
from retriever.gaps import analyze_gaps, numbered_citation_list
from retriever.graph_channel import (
    GraphContext,
    RelationalResult,
    expand_graph,
    relational_arm,
    resolve_seeds,
)
from retriever.ranking import Hit, RankedHit, fuse_and_rank
from schemas.tools import (
    Passage,
    PassageFilters,
    RetrieveContextRequest,
    RetrieveContextResponse,
    SearchKnowledgeBaseRequest,
    SearchKnowledgeBaseResponse,
)
from services import tracing
from services.embedding_config import EmbeddingConfig
from services.errors import InvalidPayloadError, OrgMemoryError
from services.hierarchy import OrgHierarchy
from services.metrics import RETRIEVAL_ARM_SECONDS
from services.ports import Embedder, Reranker, Synthesizer
from services.viewer import Principals, Viewer

log = logging.getLogger("orgmem.retriever")
T = TypeVar("T")
LEXEME_STATS_TTL_S = 300.0


def query_hash(query: str) -> str:
    return hashlib.sha256(query.encode("utf-8")).hexdigest()


@dataclass
class PassageSearch:
    ranked: list[RankedHit]
    rows: dict[str, sql.ChunkRow]
    scores: dict[str, float]
    diagnostics: dict[str, Any]
    relational: RelationalResult = field(default_factory=RelationalResult)


class RetrieverService:
    def __init__(
        self,
        *,
        pool: asyncpg.Pool,
        hierarchy: OrgHierarchy,
        embedder: Embedder | None,
        embedding: EmbeddingConfig,
        reranker: Reranker | None = None,
        synthesizer: Synthesizer | None = None,
        ef_search: int = sql.DEFAULT_EF_SEARCH,
        exact_threshold: int = sql.DEFAULT_EXACT_THRESHOLD,
    ) -> None:
        self.pool = pool
        self.hierarchy = hierarchy
        self.embedder = embedder
        self.embedding = embedding
        self.reranker = reranker
        self.synthesizer = synthesizer
        self.ef_search = ef_search
        self.exact_threshold = exact_threshold
        self._pgvector: tuple[int, ...] | None = None
        self._lexemes: tuple[float, sql.LexemeStats | None] | None = None
        self.access = AccessRecorder(pool)

    async def aclose(self) -> None:
        """Write pending access counts (before the pool closes)."""
        await self.access.aclose()

    async def pgvector(self) -> tuple[int, ...]:
        if self._pgvector is None:
            async with self.pool.acquire() as conn:
                self._pgvector = await sql.pgvector_version(conn)
        return self._pgvector

    async def lexeme_stats(self, conn: asyncpg.Connection) -> sql.LexemeStats | None:
        """The planner's lexeme statistics, re-read at most every ``LEXEME_STATS_TTL_S`` seconds."""
        now = time.monotonic()
        if self._lexemes is None or now - self._lexemes[0] > LEXEME_STATS_TTL_S:
            self._lexemes = (now, await sql.lexeme_stats(conn))
        return self._lexemes[1]

    # ---- passages ---------------------------------------------------------------------------------
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

    async def _dense_config(self) -> sql.DenseConfig:
        return sql.DenseConfig(
            self.embedding.model, self.embedding.dim, await self.pgvector(), self.ef_search, self.exact_threshold
        )

    async def _semantic(
        self, scope: sql.SearchScope, vector: list[float] | None, candidates: Sequence[str]
    ) -> dict[str, float]:
        """The ``semantic`` step: exact cosine of every text-arm candidate, so fusion has a dense
        score for the lexical hits the dense arm did not return."""
        if vector is None or not candidates:
            return {}
        cfg = await self._dense_config()
        async with self.pool.acquire() as conn:
            return await sql.score_by_vector(conn, scope, vector, candidates, cfg)

    async def _dense(
        self, scope: sql.SearchScope, vector: list[float] | None, k: int, timings: dict[str, float]
    ) -> sql.DenseResult:
        if vector is None:
            return sql.DenseResult([], "no_embedder")
        cfg = await self._dense_config()
        async with self.pool.acquire() as conn:
            return await sql.dense_arm(conn, scope, vector, cfg, k)

    async def _lexical(self, scope: sql.SearchScope, query: str, k: int, prf: bool = False) -> sql.LexicalResult:
        arm = sql.lexical_arm_prf if prf else sql.lexical_arm
        async with self.pool.acquire() as conn:
            return await arm(conn, scope, query, k, await self.lexeme_stats(conn))

    async def _relational(self, scope: sql.SearchScope, query: str) -> RelationalResult:
        if scope.matches_nothing:
            return RelationalResult(notes={"relational": "empty viewer"})
        async with self.pool.acquire() as conn:
            return await relational_arm(conn, workspace=scope.workspace, viewer=scope.viewer, query=query)

    async def search_passages(
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
        if filters.author:
            async with self.pool.acquire() as conn:
                author_ids = await sql.resolve_author(conn, workspace, filters.author)
        scope = sql.SearchScope(
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
        names, config = ARM_PRESETS[arms]
        k = min(100, max(40, 4 * limit))
        empty: Any = None
        wants_vector = "dense" in names or "semantic" in names
        vector = await self._query_vector(query, timings) if wants_vector and not scope.matches_nothing else None
        dense, lexical, relational = await asyncio.gather(
            self._timed(timings, "dense", lambda: self._dense(scope, vector, k, timings))
            if "dense" in names
            else asyncio.sleep(0, empty),
            self._timed(timings, "lexical", lambda: self._lexical(scope, query, k, arms == "full" and sql.PRF_ENABLED))
            if "lexical" in names
            else asyncio.sleep(0, empty),
            self._timed(timings, "relational", lambda: self._relational(scope, query))
            if "relational" in names
            else asyncio.sleep(0, empty),
        )
        arm_ids: dict[str, list[str]] = {}
        arm_scores: dict[str, dict[str, float]] = {}
        arm_diag: dict[str, Any] = {}
        if dense is not None:
            arm_ids["dense"] = dense.ids
            arm_diag["dense"] = {
                "count": len(dense.ids),
                "strategy": dense.strategy,
                "ef_search": dense.ef_search,
                "visible_probe": dense.probe,
            }
        if lexical is not None:
            arm_ids["lexical"] = lexical.ids
            arm_scores["lexical"] = lexical.scores
            arm_diag["lexical"] = {"count": len(lexical.ids), "query": lexical.note}
        if "semantic" in names:
            # the dense arm re-scored over every text candidate: its ids in similarity order, with scores
            pool = [*arm_ids.get("dense", []), *arm_ids.get("lexical", [])]  # score_by_vector de-duplicates
            semantic = await self._timed(timings, "semantic", lambda: self._semantic(scope, vector, pool))
            if semantic:
                added = len(set(semantic) - set(arm_ids.get("dense", [])))
                arm_ids["dense"] = list(semantic)
                arm_scores["dense"] = semantic
                arm_diag["semantic"] = {"scored": len(semantic), "added_to_dense": added}
        relational = relational or RelationalResult()
        if "relational" in names:
            arm_ids["relational"] = relational.chunk_ids
            arm_diag["relational"] = {
                "count": len(relational.chunk_ids),
                "parsed": relational.parsed,
                **relational.notes,
            }
        candidates = list(dict.fromkeys(i for ids in arm_ids.values() for i in ids))
        async with self.pool.acquire() as conn:
            rows = await self._timed(timings, "fetch", lambda: sql.fetch_chunks(conn, scope, candidates))
        hits = {
            cid: Hit(
                cid,
                r.document_id,
                r.content_hash,
                r.title,
                r.text,
                r.event_time,
                self.hierarchy.scope_of(r.principals, own),
                r.access_count,
            )
            for cid, r in rows.items()
        }
        result = fuse_and_rank(
            arm_ids,
            hits,
            query,
            now,
            config,
            arm_scores=arm_scores,
            boost_range=axes.boost_range,
            keep_at_least=limit,
        )
        ranked = list(result.hits)
        scores = {rh.hit.chunk_id: rh.score for rh in ranked}
        diag: dict[str, Any] = {
            "arms": arm_diag,
            "fusion": fusion_diagnostics(result.diagnostics, set(rows)),
            "timings_ms": timings,
        }
        if self.reranker is not None and len(ranked) > limit:
            texts = [rows[rh.hit.chunk_id].text for rh in ranked]
            order = await self._timed(timings, "rerank", lambda: self.reranker.rerank(query, texts))  # type: ignore[union-attr]
            ranked = [ranked[i] for i, _ in order]
            scores = {ranked[n].hit.chunk_id: s for n, (_, s) in enumerate(order)}
            diag["rerank"] = {"shortlist": len(texts)}
        return PassageSearch(ranked[:limit], rows, scores, diag, relational)

    def _passage(self, rh: RankedHit, row: sql.ChunkRow, score: float, text: str | None = None) -> Passage:
        return Passage(
            document_id=row.document_id,
            source_system=row.source_system,
            external_id=row.external_id,
            chunk_id=row.chunk_id,
            text=text if text is not None else (row.parent_text or row.text),
            snippet=row.text,
            title=row.title,
            score=score,
            channel_ranks=dict(rh.arm_ranks),
            scope=rh.hit.scope,
            event_time=row.event_time,
            kind=row.kind,
            url=row.url,
        )

    async def search_knowledge_base(
        self, req: SearchKnowledgeBaseRequest, viewer: Viewer
    ) -> SearchKnowledgeBaseResponse:
        start = time.perf_counter()
        now = datetime.now(UTC)
        axes = TimeAxes(req.as_of, None, None, req.filters.date_from, req.filters.date_to, None, None, "host")
        found = await self.search_passages(
            query=req.query,
            workspace=req.workspace,
            filters=req.filters,
            limit=req.limit,
            arms=req.arms,
            viewer=viewer.expand(self.hierarchy),
            own=viewer.principals,
            axes=axes,
            now=now,
        )
        passages = [
            self._passage(rh, found.rows[rh.hit.chunk_id], found.scores[rh.hit.chunk_id]) for rh in found.ranked
        ]
        self.access.record(p.chunk_id for p in passages)
        await self._audit(req.workspace, viewer, "search_knowledge_base", req.query, passages, start, found.diagnostics)
        return SearchKnowledgeBaseResponse(passages=passages, diagnostics=found.diagnostics)

    # ---- retrieve_context -------------------------------------------------------------------------
    async def _graph(self, req: RetrieveContextRequest, viewer: Principals, axes: TimeAxes) -> GraphContext:
        ctx = GraphContext()
        if not viewer or (not req.subjects and not req.about):
            return ctx
        async with self.pool.acquire() as conn:
            await resolve_seeds(
                conn,
                workspace=req.workspace,
                viewer=viewer,
                subjects=[(s.type, s.id) for s in req.subjects],
                about=req.about,
                ctx=ctx,
            )
            await expand_graph(
                conn,
                workspace=req.workspace,
                viewer=viewer,
                ctx=ctx,
                as_of=axes.as_of,
                believed_as_of=axes.believed_as_of,
                grain=axes.grain,
                diff_range=axes.diff_range,
            )
        return ctx

    async def retrieve_context(self, req: RetrieveContextRequest, viewer: Viewer) -> RetrieveContextResponse:
        with tracing.span("retrieve_context") as sp:
            tracing.set_attributes(sp, workspace=req.workspace, mode=req.mode)
            return await self._retrieve_context(req, viewer)

    async def _retrieve_context(self, req: RetrieveContextRequest, viewer: Viewer) -> RetrieveContextResponse:
        start = time.perf_counter()
        now = datetime.now(UTC)
        if req.mode == "graph_first" and not req.subjects and not req.about:
            raise InvalidPayloadError(
                "mode graph_first needs at least one subject seed (subjects and/or about)", field="subjects"
            )
        principals = viewer.expand(self.hierarchy)
        axes = resolve_time(
            req.query,
            req.filters,
            as_of=req.as_of,
            believed_as_of=req.believed_as_of,
            grain=req.as_of_grain,
            now=now,
        )
        found, graph = await asyncio.gather(
            self.search_passages(
                query=req.query,
                workspace=req.workspace,
                filters=req.filters,
                limit=req.limit,
                arms=req.arms,
                viewer=principals,
                own=viewer.principals,
                axes=axes,
                now=now,
            ),
            self._graph(req, principals, axes),
        )
        facts = graph.structured_facts
        packed = pack_context(
            req.mode,
            req.max_tokens,
            [(rh.hit.chunk_id, found.rows[rh.hit.chunk_id].parent_text or rh.hit.text) for rh in found.ranked],
            [(f"fact:{i}", fact_text(f)) for i, f in enumerate(facts)],
            [(f"path:{i}", path_text(p)) for i, p in enumerate(graph.paths)],
        )
        kept = {item.key: item.text for item in packed.kept}
        passages = [
            self._passage(rh, found.rows[rh.hit.chunk_id], found.scores[rh.hit.chunk_id], kept[rh.hit.chunk_id])
            for rh in found.ranked
            if rh.hit.chunk_id in kept
        ]
        facts = [f for i, f in enumerate(facts) if f"fact:{i}" in kept]
        paths = [p for i, p in enumerate(graph.paths) if f"path:{i}" in kept]
        diag = found.diagnostics | {
            "mode": req.mode,
            "graph": {
                "seeds": len(graph.seeds),
                "about": graph.resolved_about,
                **graph.notes,
                "structured_facts": len(facts),
                "paths": len(paths),
                "fact_diffs": len(graph.fact_diffs),
            },
            "packing": packing_diagnostics(packed, req.max_tokens),
        }
        answer, gaps = None, None
        if req.synthesize:
            answer, diag["synthesis"] = await self._synthesize(req.query, passages)
            gaps = self._gaps(req.query, passages, facts, now)
        response = RetrieveContextResponse(
            passages=passages,
            search_facts=found.relational.search_facts,
            structured_facts=facts,
            paths=paths,
            fact_diffs=graph.fact_diffs,
            temporal_plan=plan_dict(axes),
            gaps=gaps,
            answer=answer,
            diagnostics=diag,
        )
        self.access.record(p.chunk_id for p in passages)
        await self._audit(req.workspace, viewer, "retrieve_context", req.query, passages, start, diag)
        return response

    async def _synthesize(self, query: str, passages: Sequence[Passage]) -> tuple[str, dict[str, Any]]:
        fallback = numbered_citation_list(
            [Hit(str(p.chunk_id), str(p.document_id), "", p.title, p.text, p.event_time, p.scope) for p in passages]
        )
        if self.synthesizer is None:
            return fallback, {"used": False, "reason": "no LLM configured (LLM_BASE_URL unset)"}
        if not passages:
            return fallback, {"used": False, "reason": "no passages"}
        try:
            return await self.synthesizer.synthesize(query, [p.text for p in passages]), {"used": True}
        except OrgMemoryError as exc:
            log.warning("synthesis failed, returning the numbered list: %s", exc)
            return fallback, {
                "used": False,
                "reason": f"synthesis failed: {type(exc).__name__}: {exc.message}",
            }

    @staticmethod
    def _gaps(
        query: str, passages: Sequence[Passage], facts: Sequence[dict[str, Any]], now: datetime
    ) -> dict[str, Any]:
        last_seen: dict[str, datetime] = {}
        for f in facts:
            subject, seen = f.get("subject"), f.get("recorded_at")
            name = str(subject.get("name") or subject.get("id")) if isinstance(subject, dict) else str(subject)
            if subject and isinstance(seen, str):
                try:
                    ts = datetime.fromisoformat(seen)
                except ValueError:
                    continue
                last_seen[name] = max(ts, last_seen.get(name, ts))
        report = analyze_gaps(query, [(p.text, p.event_time) for p in passages], last_seen, now)
        return json.loads(json.dumps(dataclasses.asdict(report), default=str))  # type: ignore[no-any-return]

    async def _audit(
        self,
        workspace: str,
        viewer: Viewer,
        tool: str,
        query: str,
        passages: Sequence[Passage],
        start: float,
        diag: dict[str, Any],
    ) -> None:
        latency = (time.perf_counter() - start) * 1000
        diag.setdefault("timings_ms", {})["total"] = round(latency, 2)
        who = viewer.principal_id or (",".join(viewer.groups)[:1000] or None)
        async with self.pool.acquire() as conn:
            await sql.write_audit(
                conn,
                workspace=workspace,
                viewer=who,
                tool=tool,
                query_hash=query_hash(query),
                returned_ids=[str(p.chunk_id) for p in passages],
                returned_documents=[p.document_id for p in passages],
                latency_ms=latency,
                diagnostics=json.dumps({"timings_ms": diag.get("timings_ms")}),
            )
