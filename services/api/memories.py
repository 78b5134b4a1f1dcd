"""Agent memories over HTTP.

Writes: ``POST /v1/memories`` (202 with the memory id), ``POST /v1/memories/batch`` (one session's
memories as one write for the throttle), ``POST /v1/memories/{id}/versions`` (``{"text"}``: a new version
superseding the current one; the author only) and ``DELETE /v1/memories/{id}`` (a tombstone).
Reads: ``GET /v1/memories`` (``scope``, ``limit``, ``cursor``: mine, or shared at a group I hold),
``GET /v1/memories/{id}`` (with its version history) and ``GET /v1/whoami`` (my principal, groups and the
scopes I may write to).

403 names the scope the caller does not hold; 404 a memory the caller may not see (or that does not exist);
422 names the field; 429 with ``Retry-After`` when the caller's session is throttled
(``MEMORY_WRITE_COOLDOWN_S`` / ``MEMORY_WRITE_CAP``).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from schemas.memory import (
    ForgetResponse,
    GetMemoryRequest,
    ListMemoriesRequest,
    MemoryDetail,
    MemoryList,
    RememberBatchRequest,
    RememberBatchResponse,
    RememberRequest,
    RememberResponse,
    UpdateMemoryBody,
    UpdateMemoryRequest,
    UpdateMemoryResponse,
    WhoAmIRequest,
    WhoAmIResponse,
)
from services import memory_verbs
from services.api.auth import require_viewer
from services.memories import MemoryWriteError, caller_of, get_memory_service
from services.runtime import Runtime
from services.viewer import Viewer

router = APIRouter(tags=["memories"])
M = TypeVar("M", bound=BaseModel)
Workspace = Annotated[str, Query(max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]


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


def _model(model: type[M], values: dict[str, Any]) -> M:
    """Query/path values as a contract; a refusal is the usual 422 naming the field."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from None


@router.post("/v1/memories", status_code=status.HTTP_202_ACCEPTED, response_model=RememberResponse)
async def remember(
    body: RememberRequest, request: Request, viewer: Annotated[Viewer, Depends(require_viewer)]
) -> RememberResponse:
    rt = _rt(request)
    try:
        return await get_memory_service(rt).remember(body, caller_of(rt, viewer))
    except MemoryWriteError as exc:
        raise http_error(exc) from exc


@router.post("/v1/memories/batch", status_code=status.HTTP_202_ACCEPTED, response_model=RememberBatchResponse)
async def remember_batch(
    body: RememberBatchRequest, request: Request, viewer: Annotated[Viewer, Depends(require_viewer)]
) -> RememberBatchResponse:
    rt = _rt(request)
    try:
        return await get_memory_service(rt).remember_batch(body, caller_of(rt, viewer))
    except MemoryWriteError as exc:
        raise http_error(exc) from exc


@router.get("/v1/memories", response_model=MemoryList)
async def list_memories(
    request: Request,
    viewer: Annotated[Viewer, Depends(require_viewer)],
    workspace: Workspace = "default",
    scope: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query()] = 20,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> MemoryList:
    req = _model(ListMemoriesRequest, {"scope": scope, "limit": limit, "cursor": cursor, "workspace": workspace})
    try:
        return await memory_verbs.list_memories(_rt(request), viewer, req)
    except MemoryWriteError as exc:
        raise http_error(exc) from exc


@router.get("/v1/memories/{memory_id}", response_model=MemoryDetail)
async def get_memory(
    memory_id: str,
    request: Request,
    viewer: Annotated[Viewer, Depends(require_viewer)],
    workspace: Workspace = "default",
) -> MemoryDetail:
    req = _model(GetMemoryRequest, {"memory_id": memory_id, "workspace": workspace})
    try:
        return await memory_verbs.get_memory(_rt(request), viewer, req)
    except MemoryWriteError as exc:
        raise http_error(exc) from exc


@router.post(
    "/v1/memories/{memory_id}/versions", status_code=status.HTTP_202_ACCEPTED, response_model=UpdateMemoryResponse
)
async def update_memory(
    memory_id: str,
    body: UpdateMemoryBody,
    request: Request,
    viewer: Annotated[Viewer, Depends(require_viewer)],
    workspace: Workspace = "default",
) -> UpdateMemoryResponse:
    req = _model(UpdateMemoryRequest, {"memory_id": memory_id, "text": body.text, "workspace": workspace})
    try:
        return await memory_verbs.update_memory(_rt(request), viewer, req)
    except MemoryWriteError as exc:
        raise http_error(exc) from exc


@router.delete("/v1/memories/{memory_id}", status_code=status.HTTP_202_ACCEPTED, response_model=ForgetResponse)
async def forget(
    memory_id: str,
    request: Request,
    viewer: Annotated[Viewer, Depends(require_viewer)],
    workspace: Workspace = "default",
) -> ForgetResponse:
    rt = _rt(request)
    try:
        return await get_memory_service(rt).forget(memory_id, caller_of(rt, viewer), workspace=workspace)
    except MemoryWriteError as exc:
        raise http_error(exc) from exc


@router.get("/v1/whoami", response_model=WhoAmIResponse, tags=["agents"])
async def whoami(request: Request, viewer: Annotated[Viewer, Depends(require_viewer)]) -> WhoAmIResponse:
    return await memory_verbs.whoami(_rt(request), viewer, WhoAmIRequest())
