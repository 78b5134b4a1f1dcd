"""The memory wire contracts — remember, forget and the memory verbs (list, get, update, whoami) — in one
place: the server's ``schemas.memory`` re-exports these classes, so the SDK and the server validate with
the very same models. The tool contracts are :mod:`orgmem_sdk.models`."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from orgmem_sdk.models import Workspace

MAX_MEMORY_CHARS = 20_000
MemoryKind = Literal["note", "decision", "preference", "fact", "procedure"]
Label = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=128)]


def check_scope(v: str) -> str:
    """``user`` or ``group:<uuid>`` (lower-cased, canonical uuid), else a ValueError."""
    v = v.strip().lower()
    if v == "user":
        return v
    try:
        if v.startswith("group:") and str(uuid.UUID(v[len("group:") :])) == v[len("group:") :]:
            return v
    except ValueError:
        pass
    raise ValueError('must be "user" or group:<uuid>')


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
        return check_scope(v)


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


MAX_BATCH = 500


MAX_LIST_LIMIT = 100


MemoryText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_MEMORY_CHARS)]


MemoryId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)]


class RememberBatchRequest(BaseModel):
    """Several memories of one session written as ONE write for the throttle (``POST /v1/memories/batch``;
    the ADK adapter's ``add_session_to_memory``). Every item is checked before any is written."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    memories: list[RememberRequest] = Field(min_length=1, max_length=MAX_BATCH)


class RememberBatchResponse(BaseModel):
    memories: list[RememberResponse]


class ListMemoriesRequest(BaseModel):
    """``list_memories`` (``GET /v1/memories``): without ``scope`` the caller's own memories (any scope);
    ``scope=user`` the caller's private ones; ``scope=group:<uuid>`` every memory shared with a group the
    caller holds. Newest first; ``cursor`` is the previous page's ``next_cursor``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    scope: str | None = Field(default=None, description='omitted: mine; "user": my private memories; group:<uuid>')
    limit: int = Field(default=20, description="memories per page, at most 100")
    cursor: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = None
    workspace: Workspace = "default"

    @field_validator("scope")
    @classmethod
    def _scope(cls, v: str | None) -> str | None:
        return None if v is None else check_scope(v)

    @field_validator("limit", mode="before")
    @classmethod
    def _clamp(cls, v: object) -> object:
        if isinstance(v, int) and not isinstance(v, bool):
            return min(MAX_LIST_LIMIT, max(1, v))
        return v


class GetMemoryRequest(BaseModel):
    """``get_memory`` (``GET /v1/memories/{id}``): one memory the caller may see, with its version history."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    memory_id: MemoryId = Field(description="the id remember returned")
    workspace: Workspace = "default"


class UpdateMemoryRequest(BaseModel):
    """``update_memory`` (``POST /v1/memories/{id}/versions`` with ``{"text"}``): a new version that
    supersedes the current one; same id, scope and kind; the history is kept. Only the author may."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    memory_id: MemoryId = Field(description="the id remember returned")
    text: MemoryText = Field(description="the memory's new text, as a self-contained statement")
    workspace: Workspace = "default"


class UpdateMemoryBody(BaseModel):
    """The HTTP body of ``POST /v1/memories/{id}/versions``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    text: MemoryText


class WhoAmIRequest(BaseModel):
    """``whoami`` (``GET /v1/whoami``): takes nothing; the caller is the authenticated viewer."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Memory(BaseModel):
    memory_id: str
    kind: str = Field(description="note | decision | preference | fact | procedure")
    title: str | None = None
    text: str
    scope: str = Field(description='"user" (the author only) or the group:<uuid> it is shared with')
    principals: list[str] = Field(description="who can retrieve it (its ACL)")
    author: str | None = Field(default=None, description="the author's user principal")
    session_id: str | None = None
    event_time: datetime
    version: int = Field(description="the current version; update_memory adds one")


class MemoryVersion(BaseModel):
    version: int
    op: str
    event_time: datetime
    envelope_id: uuid.UUID
    text: str | None = Field(default=None, description="that version's text (None when its archive is gone)")


class MemoryDetail(Memory):
    versions: list[MemoryVersion] = Field(default_factory=list, description="oldest first; the last is current")


class MemoryList(BaseModel):
    memories: list[Memory]
    next_cursor: str | None = Field(default=None, description="pass as cursor for the next page; None: the end")


class UpdateMemoryResponse(BaseModel):
    memory_id: str
    supersedes_version: int
    version: int = Field(description="the version this write becomes once ingested")
    principals: list[str]
    envelope_id: uuid.UUID
    topic: str
    partition: int
    offset: int


class WhoAmIResponse(BaseModel):
    principal_id: str | None = Field(description="the user the caller acts for")
    groups: list[str] = Field(description="groups held directly (the gateway header, else the org directory)")
    expanded_groups: list[str] = Field(description="groups held, with every ancestor in the hierarchy")
    writable_scopes: list[str] = Field(description='scopes remember accepts from this caller: "user" and groups')
    is_admin: bool = False
