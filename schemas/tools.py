"""Agent tool contracts: ``retrieve_context``, ``search_knowledge_base`` and the Kafka RPC envelopes.

One source: the classes are the agent SDK's (:mod:`orgmem_sdk.models`), re-exported here so the server, its
JSON Schemas (``schemas/json/``) and every client validate with the very same models. A server-only rule
would subclass here; today there is none. Limits are clamped, not rejected (``limit`` to 1..50,
``max_tokens`` to 1..100,000); malformed values fail validation naming the field.
"""

from __future__ import annotations

from orgmem_sdk.models import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    MAX_QUERY_CHARS,
    MAX_TOKENS,
    About,
    Arms,
    Grain,
    Mode,
    Passage,
    PassageFilters,
    Query,
    RetrieveContextRequest,
    RetrieveContextResponse,
    RpcError,
    RpcReply,
    RpcRequest,
    RpcViewer,
    SearchKnowledgeBaseRequest,
    SearchKnowledgeBaseResponse,
    ShortName,
    Subject,
    Workspace,
)

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "MAX_QUERY_CHARS",
    "MAX_TOKENS",
    "About",
    "Arms",
    "Grain",
    "Mode",
    "Passage",
    "PassageFilters",
    "Query",
    "RetrieveContextRequest",
    "RetrieveContextResponse",
    "RpcError",
    "RpcReply",
    "RpcRequest",
    "RpcViewer",
    "SearchKnowledgeBaseRequest",
    "SearchKnowledgeBaseResponse",
    "ShortName",
    "Subject",
    "Workspace",
]
