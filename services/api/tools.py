"""HTTP routes of the retriever's tools: ``POST /tools/retrieve_context`` and ``POST /tools/search_knowledge_base``.

Thin: authenticate (``require_viewer``), validate (pydantic; 422 names the field), call the service,
map errors (invalid request 422, vendor failure 502, database unavailable 503).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request

from retriever.rpc import error_status
from retriever.service import RetrieverService
from retriever.wiring import get_service
from schemas.tools import (
    RetrieveContextRequest,
    RetrieveContextResponse,
    SearchKnowledgeBaseRequest,
    SearchKnowledgeBaseResponse,
)
from services.api.auth import require_viewer
from services.errors import OrgMemoryError
from services.viewer import Viewer

router = APIRouter(prefix="/tools", tags=["tools"])


def service(request: Request) -> RetrieverService:
    return get_service(request.app.state.runtime)


@router.post("/retrieve_context", response_model=RetrieveContextResponse)
async def retrieve_context(
    body: RetrieveContextRequest,
    viewer: Annotated[Viewer, Depends(require_viewer)],
    svc: Annotated[RetrieverService, Depends(service)],
) -> RetrieveContextResponse:
    try:
        return await svc.retrieve_context(body, viewer)
    except OrgMemoryError as exc:
        code, detail = error_status(exc)
        raise HTTPException(code, detail=detail) from exc


@router.post("/search_knowledge_base", response_model=SearchKnowledgeBaseResponse)
async def search_knowledge_base(
    body: SearchKnowledgeBaseRequest,
    viewer: Annotated[Viewer, Depends(require_viewer)],
    svc: Annotated[RetrieverService, Depends(service)],
) -> SearchKnowledgeBaseResponse:
    try:
        return await svc.search_knowledge_base(body, viewer)
    except OrgMemoryError as exc:
        code, detail = error_status(exc)
        raise HTTPException(code, detail=detail) from exc
