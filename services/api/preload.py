"""``POST /tools/preload``: the block an agent framework injects before a turn (``retriever/preload.py``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, HTTPException, Request

from retriever.preload import preload
from retriever.rpc import error_status
from retriever.wiring import get_service
from schemas.preload import PreloadRequest, PreloadResponse
from services.api.auth import credential_of, require_viewer
from services.errors import OrgMemoryError
from services.viewer import Viewer

router = APIRouter(prefix="/tools", tags=["tools"])


@router.post("/preload", response_model=PreloadResponse)
async def preload_route(
    body: PreloadRequest,
    viewer: Annotated[Viewer, Depends(require_viewer)],
    request: Request,
    x_api_key: Annotated[str | None, Header()] = None,
) -> PreloadResponse:
    rt = request.app.state.runtime
    workspace = (await credential_of(request, x_api_key)).workspace or "default"  # from the key, never the model
    try:
        return await preload(
            get_service(rt), viewer, body, default_top_k=rt.settings.preload_top_k, workspace=workspace
        )
    except OrgMemoryError as exc:
        code, detail = error_status(exc)
        raise HTTPException(code, detail=detail) from exc
