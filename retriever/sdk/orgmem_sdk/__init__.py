"""Org Memory's agent SDK: ``OrgMemoryClient`` (async, HTTP or Kafka request/reply), ``OrgMemorySyncClient``
(its blocking twin), typed errors, and the adapters ``orgmem_sdk.adk`` (Google ADK memory service; extra
``adk``; with ``orgmem_sdk.judge``, the after-turn judge callback, default off) and ``orgmem_sdk.langchain``
(a LangChain retriever; extra ``langchain``).

It imports nothing of the server (no module named ``services``, ``schemas`` or ``retriever``): an agents
directory's own ``services.py`` — which ADK imports as the module ``services`` — cannot shadow it.
"""

from orgmem_sdk.client import OrgMemoryClient
from orgmem_sdk.errors import (
    AuthenticationError,
    ConfigurationError,
    ForbiddenError,
    InvalidRequestError,
    NotFoundError,
    OrgMemoryClientError,
    RpcTimeoutError,
    ServerError,
    ThrottledError,
    ToolCallError,
)
from orgmem_sdk.sync_client import OrgMemorySyncClient

__version__ = "0.1.0"
__all__ = [
    "AuthenticationError",
    "ConfigurationError",
    "ForbiddenError",
    "InvalidRequestError",
    "NotFoundError",
    "OrgMemoryClient",
    "OrgMemoryClientError",
    "OrgMemorySyncClient",
    "RpcTimeoutError",
    "ServerError",
    "ThrottledError",
    "ToolCallError",
]
