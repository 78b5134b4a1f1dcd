"""Memory writes by agents: ``POST /v1/memories`` (MCP ``remember``, ADK ``add_memory``) and
``DELETE /v1/memories/{id}`` (MCP ``forget``), and the memory verbs (list, get, update, whoami).

A memory becomes a ``ChangeEnvelope`` on ``om.envelopes.v1`` (``source.system = "agent"``), so ACL,
extraction, replay, rebuild and tombstones apply unchanged. Its id is derived from the caller and the
source (agent, session id, event id — or the text when no event id is given), so a retried write is
one memory.

One source: the classes are the agent SDK's (:mod:`orgmem_sdk.memory_models`), re-exported here.
"""

from __future__ import annotations

from orgmem_sdk.memory_models import (
    MAX_BATCH,
    MAX_LIST_LIMIT,
    MAX_MEMORY_CHARS,
    ForgetRequest,
    ForgetResponse,
    GetMemoryRequest,
    Label,
    ListMemoriesRequest,
    Memory,
    MemoryDetail,
    MemoryKind,
    MemoryList,
    MemorySource,
    MemoryVersion,
    RememberBatchRequest,
    RememberBatchResponse,
    RememberRequest,
    RememberResponse,
    UpdateMemoryBody,
    UpdateMemoryRequest,
    UpdateMemoryResponse,
    WhoAmIRequest,
    WhoAmIResponse,
    check_scope,
)

__all__ = [
    "MAX_BATCH",
    "MAX_LIST_LIMIT",
    "MAX_MEMORY_CHARS",
    "ForgetRequest",
    "ForgetResponse",
    "GetMemoryRequest",
    "Label",
    "ListMemoriesRequest",
    "Memory",
    "MemoryDetail",
    "MemoryKind",
    "MemoryList",
    "MemorySource",
    "MemoryVersion",
    "RememberBatchRequest",
    "RememberBatchResponse",
    "RememberRequest",
    "RememberResponse",
    "UpdateMemoryBody",
    "UpdateMemoryRequest",
    "UpdateMemoryResponse",
    "WhoAmIRequest",
    "WhoAmIResponse",
    "check_scope",
]
