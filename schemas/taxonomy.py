"""Taxonomy write-back contracts: field-value proposals, the host's decisions, promotions."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

ProposalStatus = Literal["open", "applied", "rejected", "superseded"]
Workspace = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]


class Proposal(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: uuid.UUID
    workspace: str
    slot: str = Field(description="host ontology field (registry platform_binding): title, manager, team")
    predicate: str
    subject_id: uuid.UUID
    subject_name: str | None = None
    host_entity_id: str | None = Field(default=None, description="the subject's platform_user alias (host User)")
    current_host_value: str | None
    proposed_value: str
    evidence: list[uuid.UUID]
    confidence: float
    origin: Literal["extracted", "promoted"]
    status: ProposalStatus
    created_at: datetime
    updated_at: datetime
    decided_at: datetime | None = None
    delivered_at: datetime | None = None


class ProposalList(BaseModel):
    model_config = ConfigDict(frozen=True)
    proposals: list[Proposal]
    next_offset: int | None = None


class PromotionSubject(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["person"] = "person"
    id: uuid.UUID


class PromotionRequest(BaseModel):
    """An agent promotes a knowledge value it found (with evidence) for the host to apply or reject."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workspace: Workspace = "default"
    subject: PromotionSubject
    slot: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    value: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=512)]
    evidence: list[uuid.UUID] = Field(min_length=1, max_length=50, description="document ids the viewer can see")
    confidence: float = Field(default=0.8, ge=0, le=1)
