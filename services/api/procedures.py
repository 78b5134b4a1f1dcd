"""Procedural memory routes. Writes go through the log: ``POST /v1/procedural-memories`` produces a
``ChangeEnvelope`` of kind ``procedure`` to ``om.envelopes.v1`` (202 with its offset); ingest versions it.
``DELETE`` produces the tombstone. ``POST /tools/search_procedural_memory`` searches procedures only.

The scope (who may see the procedure) must consist of principals the caller holds — a caller cannot write
memory into someone else's scope; the author is the caller's own ``X-Principal-Id``."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from fastapi import APIRouter, HTTPException, Request, status

from retriever.procedures_search import search_procedures
from retriever.wiring import get_service
from schemas.envelope import ChangeEnvelope
from schemas.procedures import (
    CreateProcedureRequest,
    ProcedureAccepted,
    ProcedureDetail,
    ProcedureSpec,
    SearchProceduralMemoryRequest,
    SearchProceduralMemoryResponse,
)
from services import procedures
from services.api.deps import ViewerDep, WorkspaceQuery, runtime_of
from services.runtime import Runtime
from services.viewer import Viewer

router = APIRouter(tags=["procedural memory"])


def _scope(request: Request, viewer: Viewer, asked: list[str]) -> list[str]:
    return procedures.caller_scope(runtime_of(request).hierarchy.expand(viewer.principals), viewer.principal_id, asked)


@router.post("/v1/procedural-memories", status_code=status.HTTP_202_ACCEPTED, response_model=ProcedureAccepted)
async def create_procedure(body: CreateProcedureRequest, request: Request, viewer: ViewerDep) -> ProcedureAccepted:
    rt = runtime_of(request)
    scope = _scope(request, viewer, body.scope)
    spec = ProcedureSpec.model_validate(body.model_dump(include=set(ProcedureSpec.model_fields)))
    env = procedures.upsert_envelope(body.workspace, spec, scope, author_principal=viewer.principal_id)
    meta = await procedures.publish(rt, env)
    return ProcedureAccepted(
        procedure_id=procedures.procedure_id(body.workspace, spec.name, scope),
        envelope_id=env.envelope_id,
        name=spec.name,
        scope=scope,
        op="upsert",
        partition=meta.partition,
        offset=meta.offset,
    )


async def _visible(rt: Runtime, request: Request, viewer: Viewer, workspace: str, pid: uuid.UUID) -> ProcedureDetail:
    principals = viewer.expand(rt.hierarchy)
    async with rt.pool.acquire() as conn:
        found = await procedures.visible_versions(conn, workspace=workspace, viewer=principals, ids=[pid])
    if pid not in found:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="no visible procedure with this id")
    current, versions = found[pid]
    return ProcedureDetail(current=current, versions=versions)


@router.get("/v1/procedural-memories/{procedure_id}", response_model=ProcedureDetail)
async def get_procedure(
    procedure_id: uuid.UUID,
    request: Request,
    viewer: ViewerDep,
    workspace: WorkspaceQuery = "default",
) -> ProcedureDetail:
    return await _visible(runtime_of(request), request, viewer, workspace, procedure_id)


@router.delete(
    "/v1/procedural-memories/{procedure_id}", status_code=status.HTTP_202_ACCEPTED, response_model=ProcedureAccepted
)
async def delete_procedure(
    procedure_id: uuid.UUID,
    request: Request,
    viewer: ViewerDep,
    workspace: WorkspaceQuery = "default",
) -> ProcedureAccepted:
    """Tombstone (idempotent): the document stays, search stops returning it, versions are kept."""
    rt = runtime_of(request)
    detail = await _visible(rt, request, viewer, workspace, procedure_id)
    latest = detail.versions[0]
    _scope(request, viewer, latest.scope)  # only someone holding the whole scope may delete
    ext = procedures.external_id(workspace, latest.name, latest.scope)
    env = ChangeEnvelope.model_validate(
        {
            "envelope_id": str(uuid.uuid4()),
            "workspace": workspace,
            "op": "delete",
            "source": {"system": procedures.SOURCE_SYSTEM, "external_id": ext},
            "event_time": datetime.now(UTC).isoformat(),
            "acl": {"principals": latest.scope},
        }
    )
    meta = await procedures.publish(rt, env)
    return ProcedureAccepted(
        procedure_id=procedure_id,
        envelope_id=env.envelope_id,
        name=latest.name,
        scope=latest.scope,
        op="delete",
        partition=meta.partition,
        offset=meta.offset,
    )


async def run_search_procedural_memory(
    rt: Runtime, viewer: Viewer, body: SearchProceduralMemoryRequest
) -> SearchProceduralMemoryResponse:
    """The tool itself (HTTP route and MCP): procedures only, each hit's current version with its steps."""
    return await search_procedures(get_service(rt), body, viewer)
