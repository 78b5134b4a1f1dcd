"""``GET /v1/consolidations`` (the merges the viewer may see: every memory a merge came from must be visible to it;
an admin sees all) and ``POST /v1/consolidations/{id}/undo`` (the memories' author or an admin)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request

from schemas.consolidation import ConsolidationList, UndoResult
from schemas.tools import Workspace
from schemas.validation import BoundedDatetime
from services.api.deps import ViewerDep, runtime_of
from services.consolidation.run import ConsolidationError, list_consolidations, undo_consolidation

router = APIRouter(prefix="/v1/consolidations", tags=["memory"])


@router.get("", response_model=ConsolidationList)
async def list_route(
    request: Request,
    viewer: ViewerDep,
    workspace: Workspace = "default",
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    before: BoundedDatetime | None = None,
) -> ConsolidationList:
    rt = runtime_of(request)
    principals = None if viewer.is_admin else list(viewer.expand(rt.hierarchy))
    return await list_consolidations(rt.pool, workspace, principals, limit=limit, before=before)


@router.post("/{consolidation_id}/undo", response_model=UndoResult)
async def undo_route(consolidation_id: uuid.UUID, request: Request, viewer: ViewerDep) -> UndoResult:
    rt = runtime_of(request)
    try:
        return await undo_consolidation(
            rt.pool,
            consolidation_id,
            principal_id=viewer.principal_id,
            principals=list(viewer.expand(rt.hierarchy)),
            is_admin=viewer.is_admin,
        )
    except ConsolidationError as exc:
        raise HTTPException(exc.status, detail={"field": exc.field, "msg": str(exc)}) from exc
