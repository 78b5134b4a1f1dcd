"""``RetrieverService``: ``retrieve_context`` and ``search_knowledge_base``, shared by HTTP, MCP and Kafka RPC.

Per call: expand the viewer's groups through the org hierarchy; search passages along the arms
(``retriever.passages.PassageSearcher``: dense, lexical, relational concurrently, each on its own
connection, ACL inside SQL; fused, optionally reranked); expand the graph channels; pack; optionally
synthesize; record access counts and write one ``retrieval_audit`` row. Diagnostics only ever name
chunks the viewer can see.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import asyncpg
from pydantic import BaseModel

from retriever.access import AccessRecorder
from retriever.compose import (
    TimeAxes,
    fact_text,
    pack_context,
    packing_diagnostics,
    path_text,
    plan_dict,
    resolve_time,
)
from retriever.dense import DEFAULT_EF_SEARCH, DEFAULT_EXACT_THRESHOLD
from retriever.fabric import add_hint_seeds, fabric_join
from retriever.gaps import analyze_gaps, gap_report_dict, numbered_citation_list
from retriever.graph.channel import (
    GraphContext,
    expand_graph,
    resolve_seeds,
)
from retriever.hits import Hit, RankedHit
from retriever.passages import PassageSearch, PassageSearcher
from retriever.rows import ChunkRow, write_audit
from schemas.graph import Fact
from schemas.tools import (
    Passage,
    RetrieveContextRequest,
    RetrieveContextResponse,
    SearchKnowledgeBaseRequest,
    SearchKnowledgeBaseResponse,
)
from services import tracing
from services.db.readpool import ReadPool
from services.embedding_config import EmbeddingConfig
from services.errors import InvalidPayloadError, OrgMemoryError
from services.hierarchy import OrgHierarchy
from services.ports import Embedder, Reranker, Synthesizer
from services.viewer import Principals, Viewer

log = logging.getLogger("orgmem.retriever")
T = TypeVar("T")


def query_hash(query: str) -> str:
    return hashlib.sha256(query.encode("utf-8")).hexdigest()


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
        ef_search: int = DEFAULT_EF_SEARCH,
        exact_threshold: int = DEFAULT_EXACT_THRESHOLD,
        read_pool: ReadPool | None = None,
    ) -> None:
        self.pool = pool  # writes (audit) and reads of one's own writes
        self.reads: ReadPool = read_pool or ReadPool(pool, None)  # passage and graph reads: the replica if any
        self.hierarchy = hierarchy
        self.synthesizer = synthesizer
        self.passages = PassageSearcher(
            pool=self.reads,  # quacks like asyncpg.Pool for acquire()
            hierarchy=hierarchy,
            embedder=embedder,
            embedding=embedding,
            reranker=reranker,
            ef_search=ef_search,
            exact_threshold=exact_threshold,
        )
        self.access = AccessRecorder(pool)

    async def aclose(self) -> None:
        """Write pending access counts (before the pool closes)."""
        await self.access.aclose()

    def _passage(
        self, rh: RankedHit, row: ChunkRow, score: float, text: str | None = None, window: Any = None
    ) -> Passage:
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
            window=window if window and len(window) > 1 else None,
        )

    async def search_knowledge_base(
        self, req: SearchKnowledgeBaseRequest, viewer: Viewer
    ) -> SearchKnowledgeBaseResponse:
        start = time.perf_counter()
        now = datetime.now(UTC)
        axes = TimeAxes(req.as_of, None, None, req.filters.date_from, req.filters.date_to, None, None, "host")
        found = await self.passages.search(
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
            self._passage(rh, found.rows[rh.hit.chunk_id], found.scores[rh.hit.chunk_id], None, _window(found, rh))
            for rh in found.ranked
        ]
        self.access.record(p.chunk_id for p in passages)
        await self._audit(req.workspace, viewer, "search_knowledge_base", req.query, passages, start, found.diagnostics)
        return SearchKnowledgeBaseResponse(passages=passages, diagnostics=found.diagnostics)

    # ---- retrieve_context -------------------------------------------------------------------------
    async def _graph(
        self, req: RetrieveContextRequest, viewer: Principals, axes: TimeAxes, *, hints: bool = False
    ) -> GraphContext:
        """Seeds (subjects, ``about`` and, for the fabric, the query's entity hints), then their facts and paths."""
        ctx = GraphContext()
        if not viewer or (not hints and not req.subjects and not req.about):
            return ctx
        async with self.reads.acquire() as conn:
            await resolve_seeds(
                conn,
                workspace=req.workspace,
                viewer=viewer,
                subjects=[(s.type, s.id) for s in req.subjects],
                about=req.about,
                ctx=ctx,
            )
            if hints:
                await add_hint_seeds(conn, req, viewer, ctx)
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

    async def _fabric_graph(self, req: RetrieveContextRequest, viewer: Principals, axes: TimeAxes) -> GraphContext:
        """The fabric's graph channel: seeds from the query's entity hints too; a failing graph is not fatal."""
        try:
            return await self._graph(req, viewer, axes, hints=True)
        except (asyncpg.PostgresError, OSError, TimeoutError) as exc:
            ctx = GraphContext()
            ctx.notes["fabric"] = f"graph unavailable: {type(exc).__name__}"
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
            self.passages.search(
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
            self._fabric_graph(req, principals, axes) if req.mode == "fabric" else self._graph(req, principals, axes),
        )
        if req.mode == "fabric":
            found, graph, fabric_diag = fabric_join(found, graph, now)
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
            self._passage(
                rh,
                found.rows[rh.hit.chunk_id],
                found.scores[rh.hit.chunk_id],
                kept[rh.hit.chunk_id],
                _window(found, rh),
            )
            for rh in found.ranked
            if rh.hit.chunk_id in kept
        ]
        facts = [f for i, f in enumerate(facts) if f"fact:{i}" in kept]
        paths = [p for i, p in enumerate(graph.paths) if f"path:{i}" in kept]
        diag = found.diagnostics | {
            "mode": req.mode,
            "graph": _graph_diagnostics(graph, facts, paths),
            "packing": packing_diagnostics(packed, req.max_tokens),
        }
        if req.mode == "fabric":
            diag["fabric"] = fabric_diag
            passages = _cross_validated(passages, fabric_diag)
        answer, gaps = None, None
        if req.synthesize:
            answer, diag["synthesis"] = await self._synthesize(req.query, passages)
            gaps = self._gaps(req.query, passages, facts, now)
        response = RetrieveContextResponse(
            passages=passages,
            search_facts=_dumped(found.relational.search_facts),
            structured_facts=_dumped(facts),
            paths=_dumped(paths),
            fact_diffs=_dumped(graph.fact_diffs),
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
    def _gaps(query: str, passages: Sequence[Passage], facts: Sequence[Fact], now: datetime) -> dict[str, Any]:
        """Gap analysis over the packed answer; an entity is last seen when its newest fact was recorded."""
        last_seen: dict[str, datetime] = {}
        for f in facts:
            name = f.subject.name or str(f.subject.id)
            last_seen[name] = max(f.recorded_at, last_seen.get(name, f.recorded_at))
        report = analyze_gaps(query, [(p.text, p.event_time) for p in passages], last_seen, now)
        return gap_report_dict(report)

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
        diag["reads"] = self.reads.status()  # replica, or the primary and why
        who = viewer.principal_id or (",".join(viewer.groups)[:1000] or None)
        async with self.pool.acquire() as conn:
            await write_audit(
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


def _dumped(items: Sequence[BaseModel]) -> list[dict[str, Any]]:
    """Typed graph results as the response's JSON objects: the one place they stop being models."""
    return [item.model_dump(mode="json") for item in items]


def _window(found: PassageSearch, rh: RankedHit) -> Any:
    """The hit's conversation window from the full arm's diagnostics (``retriever/windows.py``), if any."""
    return (found.diagnostics.get("windows") or {}).get(rh.hit.chunk_id)


def _graph_diagnostics(graph: GraphContext, facts: Sequence[object], paths: Sequence[object]) -> dict[str, Any]:
    """The graph side of ``retrieve_context``'s diagnostics: seeds, resolved subjects, notes and what was kept."""
    return {
        "seeds": len(graph.seeds),
        "about": graph.resolved_about,
        **graph.notes,
        "structured_facts": len(facts),
        "paths": len(paths),
        "fact_diffs": len(graph.fact_diffs),
    }


def _cross_validated(passages: list[Passage], fabric_diag: dict[str, Any]) -> list[Passage]:
    """Fabric mode: each passage marked cross-validated (the graph agrees) with the graph relations it carries."""
    cross, relations = set(fabric_diag["cross_validated"]), fabric_diag["relations"]
    return [
        p.model_copy(
            update={
                "cross_validated": str(p.chunk_id) in cross,
                "graph_relations": relations.get(str(p.chunk_id)) or None,
            }
        )
        for p in passages
    ]
