"""The distilled profile of the current user (issue 23 §2, deterministic path): ``memory_profile`` (a catalogue tool:
HTTP ``POST /tools/memory_profile``, MCP, Kafka request/reply). Every item cites the memories and documents it came
from and is shown only when the viewer sees every one of them."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.tools import Workspace


class MemoryProfileRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    workspace: Workspace = Field(default="default", description="operators only: the workspace to read")
    limit: int = Field(default=10, ge=1, le=50, description="items per section at most (1 to 50)")


class ProfileItem(BaseModel):
    model_config = ConfigDict(frozen=True)
    text: str
    origin: Literal["memory", "fact", "summary"]
    detail: str = Field(description="the memory's kind, or the fact's predicate")
    as_of: datetime | None = None
    source_document_ids: list[uuid.UUID] = Field(description="every document the item came from")
    memory_ids: list[str] = Field(default_factory=list, description="the memories among them")


class MemoryProfile(BaseModel):
    model_config = ConfigDict(frozen=True)
    principal_id: str
    method: Literal["deterministic"] = Field(
        default="deterministic", description="built from memories and graph facts without a model"
    )
    summary: ProfileItem | None = None
    role: list[ProfileItem] = Field(default_factory=list)
    interests: list[ProfileItem] = Field(default_factory=list)
    durable_facts: list[ProfileItem] = Field(default_factory=list)
