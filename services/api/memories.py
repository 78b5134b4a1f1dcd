"""Memory writes by agents: ``POST /v1/memories`` (202 with the memory id) and ``DELETE /v1/memories/{id}``.

403 names the scope the caller does not hold; 422 names the field (empty or oversized text); 429 with
``Retry-After`` when the caller's session is throttled (``MEMORY_WRITE_COOLDOWN_S`` / ``MEMORY_WRITE_CAP``).
"""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status

from schemas.memory import ForgetResponse, RememberRequest, RememberResponse
from services.api.auth import require_viewer
from services.memories import MemoryWriteError, caller_of, get_memory_service
from services.runtime import Runtime
from services.viewer import Viewer

router = APIRouter(prefix="/v1/memories", tags=["memories"])


def http_error(exc: MemoryWriteError) -> HTTPException:
    headers = None
    if exc.status == status.HTTP_429_TOO_MANY_REQUESTS:
        # a cap refusal has no useful retry time within the session; say "later" (one hour)
        retry = 3600 if exc.retry_after_s is None else max(1, math.ceil(exc.retry_after_s))
        headers = {"Retry-After": str(retry)}
    return HTTPException(exc.status, detail={"field": exc.field, "msg": exc.message}, headers=headers)


def _rt(request: Request) -> Runtime:
    rt: Runtime = request.app.state.runtime
    return rt


@router.post("", status_code=status.HTTP_202_ACCEPTED, response_model=RememberResponse)
async def remember(
    body: RememberRequest, request: Request, viewer: Annotated[Viewer, Depends(require_viewer)]
) -> RememberResponse:
    rt = _rt(request)
    try:
        return await get_memory_service(rt).remember(body, caller_of(rt, viewer))
    except MemoryWriteError as exc:
        raise http_error(exc) from exc


@router.delete("/{memory_id}", status_code=status.HTTP_202_ACCEPTED, response_model=ForgetResponse)
async def forget(
    memory_id: str,
    request: Request,
    viewer: Annotated[Viewer, Depends(require_viewer)],
    workspace: Annotated[str, Query(max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")] = "default",
) -> ForgetResponse:
    rt = _rt(request)
    try:
        return await get_memory_service(rt).forget(memory_id, caller_of(rt, viewer), workspace=workspace)
    except MemoryWriteError as exc:
        raise http_error(exc) from exc
