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

import contextlib
import math
from collections.abc import Iterator
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, HTTPException, Query, Request, status
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
from services.api.deps import ViewerDep, WorkspaceQuery, runtime_of
from services.memories import MemoryWriteError, caller_of, get_memory_service

router = APIRouter(tags=["memories"])
M = TypeVar("M", bound=BaseModel)


def http_error(exc: MemoryWriteError) -> HTTPException:
    headers = None
    if exc.status == status.HTTP_429_TOO_MANY_REQUESTS:
        # a cap refusal has no useful retry time within the session; say "later" (one hour)
        retry = 3600 if exc.retry_after_s is None else max(1, math.ceil(exc.retry_after_s))
        headers = {"Retry-After": str(retry)}
    return HTTPException(exc.status, detail={"field": exc.field, "msg": exc.message}, headers=headers)


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    """A refused write or read (``MemoryWriteError``) as its HTTP error, named field and ``Retry-After``."""
    try:
        yield
    except MemoryWriteError as exc:
        raise http_error(exc) from exc


def _model(model: type[M], values: dict[str, Any]) -> M:
    """Query/path values as a contract; a refusal is the usual 422 naming the field."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from None


@router.post("/v1/memories", status_code=status.HTTP_202_ACCEPTED, response_model=RememberResponse)
async def remember(body: RememberRequest, request: Request, viewer: ViewerDep) -> RememberResponse:
    rt = runtime_of(request)
    with _refusals():
        return await get_memory_service(rt).remember(body, caller_of(rt, viewer))


@router.post("/v1/memories/batch", status_code=status.HTTP_202_ACCEPTED, response_model=RememberBatchResponse)
async def remember_batch(body: RememberBatchRequest, request: Request, viewer: ViewerDep) -> RememberBatchResponse:
    rt = runtime_of(request)
    with _refusals():
        return await get_memory_service(rt).remember_batch(body, caller_of(rt, viewer))


@router.get("/v1/memories", response_model=MemoryList)
async def list_memories(
    request: Request,
    viewer: ViewerDep,
    workspace: WorkspaceQuery = "default",
    scope: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query()] = 20,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> MemoryList:
    req = _model(ListMemoriesRequest, {"scope": scope, "limit": limit, "cursor": cursor, "workspace": workspace})
    with _refusals():
        return await memory_verbs.list_memories(runtime_of(request), viewer, req)


@router.get("/v1/memories/{memory_id}", response_model=MemoryDetail)
async def get_memory(
    memory_id: str,
    request: Request,
    viewer: ViewerDep,
    workspace: WorkspaceQuery = "default",
) -> MemoryDetail:
    req = _model(GetMemoryRequest, {"memory_id": memory_id, "workspace": workspace})
    with _refusals():
        return await memory_verbs.get_memory(runtime_of(request), viewer, req)


@router.post(
    "/v1/memories/{memory_id}/versions", status_code=status.HTTP_202_ACCEPTED, response_model=UpdateMemoryResponse
)
async def update_memory(
    memory_id: str,
    body: UpdateMemoryBody,
    request: Request,
    viewer: ViewerDep,
    workspace: WorkspaceQuery = "default",
) -> UpdateMemoryResponse:
    req = _model(UpdateMemoryRequest, {"memory_id": memory_id, "text": body.text, "workspace": workspace})
    with _refusals():
        return await memory_verbs.update_memory(runtime_of(request), viewer, req)


@router.delete("/v1/memories/{memory_id}", status_code=status.HTTP_202_ACCEPTED, response_model=ForgetResponse)
async def forget(
    memory_id: str,
    request: Request,
    viewer: ViewerDep,
    workspace: WorkspaceQuery = "default",
) -> ForgetResponse:
    rt = runtime_of(request)
    with _refusals():
        return await get_memory_service(rt).forget(memory_id, caller_of(rt, viewer), workspace=workspace)


@router.get("/v1/whoami", response_model=WhoAmIResponse, tags=["agents"])
async def whoami(request: Request, viewer: ViewerDep) -> WhoAmIResponse:
    return await memory_verbs.whoami(runtime_of(request), viewer, WhoAmIRequest())
