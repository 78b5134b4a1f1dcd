"""``search_procedural_memory``: the product's hybrid search over procedure documents only (same ACL as
passages), answered with each procedure's CURRENT version and its steps."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from retriever.compose import TimeAxes
from retriever.service import RetrieverService
from schemas.procedures import ProcedureHit, SearchProceduralMemoryRequest, SearchProceduralMemoryResponse
from schemas.tools import PassageFilters
from services import procedures
from services.viewer import Viewer


async def search_procedures(
    svc: RetrieverService, req: SearchProceduralMemoryRequest, viewer: Viewer
) -> SearchProceduralMemoryResponse:
    principals = viewer.expand(svc.hierarchy)
    filters = PassageFilters(kinds=["procedure"], source_systems=[procedures.SOURCE_SYSTEM])
    axes = TimeAxes(None, None, None, None, None, None, None, "host")
    found = await svc.passages.search(
        query=req.query,
        workspace=req.workspace,
        filters=filters,
        limit=min(50, req.limit * 3),
        arms="full",
        viewer=principals,
        own=viewer.principals,
        axes=axes,
        now=datetime.now(UTC),
    )
    best: dict[uuid.UUID, tuple[float, str]] = {}
    for rh in found.ranked:
        row = found.rows[rh.hit.chunk_id]
        doc = uuid.UUID(str(row.document_id))
        if doc not in best:
            best[doc] = (found.scores[rh.hit.chunk_id], row.text)
    async with svc.pool.acquire() as conn:
        versions = await procedures.visible_versions(conn, workspace=req.workspace, viewer=principals, ids=list(best))
    results = []
    for doc, (score, snippet) in best.items():
        current = versions.get(doc, (None, []))[0]
        if current is None:
            continue
        results.append(ProcedureHit(procedure=current, score=score, snippet=snippet))
        if len(results) >= req.limit:
            break
    return SearchProceduralMemoryResponse(results=results, diagnostics=found.diagnostics)
