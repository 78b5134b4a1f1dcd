"""``POST /tools/preload``: the block an agent framework injects before a turn (``retriever/preload.py``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request

from retriever.preload import preload
from retriever.rpc import error_status
from retriever.wiring import get_service
from schemas.preload import PreloadRequest, PreloadResponse
from services.api.auth import require_viewer
from services.errors import OrgMemoryError
from services.viewer import Viewer

router = APIRouter(prefix="/tools", tags=["tools"])


@router.post("/preload", response_model=PreloadResponse)
async def preload_route(
    body: PreloadRequest, viewer: Annotated[Viewer, Depends(require_viewer)], request: Request
) -> PreloadResponse:
    rt = request.app.state.runtime
    try:
        return await preload(get_service(rt), viewer, body, default_top_k=rt.settings.preload_top_k)
    except OrgMemoryError as exc:
        code, detail = error_status(exc)
        raise HTTPException(code, detail=detail) from exc
