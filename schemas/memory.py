"""Memory writes by agents: ``POST /v1/memories`` (MCP ``remember``, ADK ``add_memory``) and
``DELETE /v1/memories/{id}`` (MCP ``forget``).

A memory becomes a ``ChangeEnvelope`` on ``om.envelopes.v1`` (``source.system = "agent"``), so ACL,
extraction, replay, rebuild and tombstones apply unchanged. Its id is derived from the caller and the
source (agent, session id, event id — or the text when no event id is given), so a retried write is
one memory.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from schemas.tools import Workspace

MAX_MEMORY_CHARS = 20_000
MemoryKind = Literal["note", "decision", "preference", "fact", "procedure"]
Label = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=128)]


class MemorySource(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: Label = Field(default="agent", description="name of the agent writing the memory")
    session_id: Label | None = Field(default=None, description="conversation/session the memory comes from")
    event_id: Label | None = Field(
        default=None, description="event within the session; with session_id it makes a retried write idempotent"
    )


class RememberRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    text: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_MEMORY_CHARS)] = Field(
        description="what to remember, as a self-contained statement"
    )
    title: Annotated[str, StringConstraints(strip_whitespace=True, max_length=256)] | None = None
    kind: MemoryKind = "note"
    scope: str = Field(
        default="user",
        description='"user" (only the caller sees it) or a group principal group:<uuid> the caller belongs to '
        "(a team, division or org): every member beneath it can retrieve it",
    )
    source: MemorySource = Field(default_factory=MemorySource)
    workspace: Workspace = "default"

    @field_validator("scope")
    @classmethod
    def _scope(cls, v: str) -> str:
        v = v.strip().lower()
        if v == "user":
            return v
        try:
            if v.startswith("group:") and str(uuid.UUID(v[len("group:") :])) == v[len("group:") :]:
                return v
        except ValueError:
            pass
        raise ValueError('must be "user" or group:<uuid>')


class RememberResponse(BaseModel):
    memory_id: str = Field(description="stable id; pass it to forget")
    scope: str
    principals: list[str] = Field(description="who can retrieve the memory (its ACL)")
    key: str
    envelope_id: uuid.UUID
    topic: str
    partition: int
    offset: int


class ForgetResponse(BaseModel):
    memory_id: str
    forgotten: bool
    envelope_id: uuid.UUID
    topic: str
    partition: int
    offset: int


class ForgetRequest(BaseModel):
    """``forget`` as a tool call (MCP, Kafka request/reply); over HTTP it is ``DELETE /v1/memories/{id}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    memory_id: str = Field(description="the id remember returned")
    workspace: Workspace = "default"
