"""Procedural memory contracts. A procedure rides the log as a ``ChangeEnvelope`` whose document has kind
``procedure`` and carries a ``ProcedureSpec``; ingest keeps every version (``procedure_versions``).

Identity: (workspace, normalised name, scope principals) — a re-post of the same name in the same scope
is a new version that supersedes the current one; delete is a tombstone of that identity."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from orgmem_sdk.validation import principal_set

ProcName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
Step = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]
ToolName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
Text = Annotated[str, StringConstraints(strip_whitespace=True, max_length=4000)]
PRINCIPAL_PATTERN = r"^(user|group):[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
ScopePrincipal = Annotated[str, StringConstraints(pattern=PRINCIPAL_PATTERN)]


class ProcedureSubject(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    id: uuid.UUID


class ProcedureSpec(BaseModel):
    """The structured part of a procedure envelope (``document.procedure``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: ProcName
    description: Text = ""
    steps: list[Step] = Field(min_length=1, max_length=100)
    when_to_use: Text = ""
    tools: list[ToolName] = Field(default_factory=list, max_length=50)
    subjects: list[ProcedureSubject] = Field(default_factory=list, max_length=50)

    def render(self) -> str:
        """The searchable text of the procedure document."""
        lines = [self.name]
        if self.description:
            lines.append(self.description)
        if self.when_to_use:
            lines.append(f"When to use: {self.when_to_use}")
        lines += [f"{i}. {s}" for i, s in enumerate(self.steps, start=1)]
        if self.tools:
            lines.append("Tools: " + ", ".join(self.tools))
        return "\n".join(lines)


class CreateProcedureRequest(ProcedureSpec):
    workspace: Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")] = "default"
    scope: list[ScopePrincipal] = Field(
        default_factory=list,
        max_length=64,
        description="principals who may see it; each must be one the caller holds (default: the caller)",
    )

    @field_validator("scope")
    @classmethod
    def _norm(cls, v: list[str]) -> list[str]:
        return principal_set(v)


class ProcedureAccepted(BaseModel):
    model_config = ConfigDict(frozen=True)
    procedure_id: uuid.UUID
    envelope_id: uuid.UUID
    name: str
    scope: list[str]
    op: str
    partition: int
    offset: int


class ProcedureVersion(BaseModel):
    model_config = ConfigDict(frozen=True)
    procedure_id: uuid.UUID
    version: int
    name: str
    description: str
    steps: list[str]
    when_to_use: str
    tools: list[str]
    subjects: list[ProcedureSubject] = Field(default_factory=list)
    scope: list[str]
    status: str = Field(description="current | superseded | deleted")
    recorded_at: datetime
    superseded_at: datetime | None = None


class ProcedureDetail(BaseModel):
    model_config = ConfigDict(frozen=True)
    current: ProcedureVersion | None
    versions: list[ProcedureVersion]


class SearchProceduralMemoryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    query: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)] = Field(
        description="the task you need a procedure for, in natural language"
    )
    workspace: Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")] = Field(
        default="default", description="operators only: the workspace to read"
    )
    limit: int = Field(default=5, ge=1, le=20, description="how many procedures to return at most (1 to 20)")


class ProcedureHit(BaseModel):
    model_config = ConfigDict(frozen=True)
    procedure: ProcedureVersion
    score: float
    snippet: str


class SearchProceduralMemoryResponse(BaseModel):
    model_config = ConfigDict(frozen=True)
    results: list[ProcedureHit]
    diagnostics: dict[str, Any] = Field(default_factory=dict)
