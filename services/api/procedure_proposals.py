"""Procedure proposal routes (issue 23 §3): ``POST /v1/procedure-proposals`` (agent scope: file a draft; also the
catalogue tool ``propose_procedure``), ``GET /v1/procedure-proposals[/{id}]`` (the drafts the viewer may see),
``POST /v1/procedure-proposals/{id}/approve`` and ``/reject`` (an admin, or a viewer holding the whole scope).
The rules are in ``services.procedure_proposals``."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, status

from schemas.procedure_proposals import (
    DecideProposalRequest,
    ProcedureProposal,
    ProcedureProposalList,
    ProposalStatus,
    ProposeProcedureRequest,
)
from schemas.tools import Workspace
from schemas.validation import BoundedDatetime
from services import procedure_proposals as proposals
from services.api.deps import ViewerDep, runtime_of
from services.runtime import Runtime
from services.viewer import Viewer

router = APIRouter(prefix="/v1/procedure-proposals", tags=["procedural memory"])


async def run_propose_procedure(rt: Runtime, viewer: Viewer, req: ProposeProcedureRequest) -> ProcedureProposal:
    """The tool itself (this route, ``/tools/propose_procedure``, MCP, Kafka request/reply)."""
    return await proposals.propose(rt, viewer, req)


@router.post("", status_code=status.HTTP_201_CREATED, response_model=ProcedureProposal)
async def propose_route(body: ProposeProcedureRequest, request: Request, viewer: ViewerDep) -> ProcedureProposal:
    return await run_propose_procedure(runtime_of(request), viewer, body)


@router.get("", response_model=ProcedureProposalList)
async def list_route(
    request: Request,
    viewer: ViewerDep,
    workspace: Workspace = "default",
    proposal_status: Annotated[ProposalStatus | None, Query(alias="status")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    before: BoundedDatetime | None = None,
) -> ProcedureProposalList:
    rt = runtime_of(request)
    principals = viewer.expand(rt.hierarchy)
    return await proposals.list_proposals(
        rt.pool, workspace, principals, status=proposal_status, limit=limit, before=before
    )


@router.get("/{proposal_id}", response_model=ProcedureProposal)
async def get_route(
    proposal_id: uuid.UUID, request: Request, viewer: ViewerDep, workspace: Workspace = "default"
) -> ProcedureProposal:
    rt = runtime_of(request)
    return await proposals.get_proposal(rt.pool, workspace, proposal_id, viewer.expand(rt.hierarchy))


def _decision(approve: bool) -> Any:
    async def decide(
        proposal_id: uuid.UUID,
        request: Request,
        viewer: ViewerDep,
        body: DecideProposalRequest | None = None,
        workspace: Workspace = "default",
    ) -> ProcedureProposal:
        reason = body.reason if body else None
        rt = runtime_of(request)
        return await proposals.decide(rt, viewer, workspace, proposal_id, approve=approve, reason=reason)

    return decide


router.post(
    "/{proposal_id}/approve",
    response_model=ProcedureProposal,
    name="approve_procedure_proposal",
    description="Publish the draft as a procedure (searchable once ingested); idempotent.",
)(_decision(approve=True))
router.post(
    "/{proposal_id}/reject",
    response_model=ProcedureProposal,
    name="reject_procedure_proposal",
    description="Keep the draft, never publish it; idempotent.",
)(_decision(approve=False))
