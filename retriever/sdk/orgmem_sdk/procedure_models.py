"""The SDK's procedure-proposal wire contracts: copies of the server's ``schemas.procedure_proposals`` models (and the
field types they take from ``schemas.procedures``), kept equal to the server's by
``tests/unit/retriever/test_sdk_package.py``. ``OrgMemoryClient.propose_procedure`` files a draft that is not
searchable until a human approves it."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from orgmem_sdk.models import Workspace
from orgmem_sdk.validation import principal_set

ProcName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
Step = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]
ToolName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
Text = Annotated[str, StringConstraints(strip_whitespace=True, max_length=4000)]
PRINCIPAL_PATTERN = r"^(user|group):[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
ScopePrincipal = Annotated[str, StringConstraints(pattern=PRINCIPAL_PATTERN)]
ProposalStatus = Literal["pending", "approved", "rejected"]
Label = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=128)]


class ProposalOrigin(BaseModel):
    """Where the proposal comes from; with ``session_id`` and ``event_id`` a retried proposal is the same one."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    agent: Label = Field(default="agent", description="name of the agent proposing")
    session_id: Label | None = Field(default=None, description="conversation/session the proposal comes from")
    event_id: Label | None = Field(default=None, description="event within the session (a retry is the same one)")


class ProposeProcedureRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    title: ProcName = Field(description="the procedure's name, e.g. 'Rotate the billing API key'")
    steps: list[Step] = Field(min_length=1, max_length=100, description="the numbered steps, in order")
    description: Text = ""
    when_to_use: Text = ""
    tools: list[ToolName] = Field(default_factory=list, max_length=50)
    scope: list[ScopePrincipal] = Field(
        default_factory=list,
        max_length=64,
        description="who would see the procedure once approved; principals the caller holds (default: the caller)",
    )
    source_ids: list[uuid.UUID] = Field(
        default_factory=list,
        max_length=50,
        description="document ids or memory ids the procedure was derived from (each must be visible to the caller)",
    )
    source: ProposalOrigin = Field(default_factory=ProposalOrigin)
    workspace: Workspace = "default"

    @field_validator("scope")
    @classmethod
    def _norm(cls, v: list[str]) -> list[str]:
        return principal_set(v)


class ProcedureProposal(BaseModel):
    model_config = ConfigDict(frozen=True)

    proposal_id: uuid.UUID
    workspace: str
    status: ProposalStatus
    proposer: str = Field(description="the user principal the proposing agent acted for")
    title: str
    steps: list[str]
    description: str = ""
    when_to_use: str = ""
    tools: list[str] = Field(default_factory=list)
    scope: list[str]
    source_document_ids: list[uuid.UUID] = Field(default_factory=list)
    agent: str = "agent"
    session_id: str | None = None
    created_at: datetime
    decided_by: str | None = None
    decided_at: datetime | None = None
    reason: str | None = None
    procedure_id: uuid.UUID | None = Field(default=None, description="the procedure an approval published")
    created: bool = Field(default=True, description="false when a retry found the same proposal")


class ProcedureProposalList(BaseModel):
    model_config = ConfigDict(frozen=True)
    proposals: list[ProcedureProposal]
    next_before: datetime | None = Field(default=None, description="pass as ?before= for the next page")


class DecideProposalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    reason: Annotated[str, StringConstraints(strip_whitespace=True, max_length=2000)] | None = None
