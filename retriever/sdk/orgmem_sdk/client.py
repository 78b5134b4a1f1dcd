"""``OrgMemoryClient``: the agent-side client — the same tool calls over HTTP (``http_transport``) or signed Kafka
request/reply (``kafka_transport``: its own reply topic, futures by correlation id, retries, typed error replies).

    async with OrgMemoryClient.kafka("127.0.0.1:19092", namespace="om", api_key=AGENT_KEY) as om:
        ctx = await om.retrieve_context({"query": "who owns billing?"}, principal_id="user:…")
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Literal, TypeVar
from urllib.parse import quote, urlencode

import httpx
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from pydantic import BaseModel

from orgmem_sdk.errors import (
    AuthenticationError,
    ConfigurationError,
    ForbiddenError,
    InvalidRequestError,
    NotFoundError,
    RpcTimeoutError,
    ServerError,
    ThrottledError,
    ToolCallError,
    validated,
)
from orgmem_sdk.kafka_transport import reply_topic
from orgmem_sdk.memory_models import (
    ForgetRequest,
    ForgetResponse,
    GetMemoryRequest,
    ListMemoriesRequest,
    MemoryDetail,
    MemoryList,
    RememberBatchRequest,
    RememberBatchResponse,
    RememberRequest,
    RememberResponse,
    UpdateMemoryRequest,
    UpdateMemoryResponse,
    WhoAmIResponse,
)
from orgmem_sdk.models import (
    PreloadRequest,
    PreloadResponse,
    RetrieveContextRequest,
    RetrieveContextResponse,
    RpcReply,
    SearchKnowledgeBaseRequest,
    SearchKnowledgeBaseResponse,
)
from orgmem_sdk.proposals import ProposalCalls

log = logging.getLogger("orgmem.client")
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
Transport = Literal["http", "kafka"]
BACKOFF_BASE_S = 0.2
BACKOFF_MAX_S = 5.0
__all__ = [
    "AuthenticationError",
    "ConfigurationError",
    "ForbiddenError",
    "InvalidRequestError",
    "NotFoundError",
    "OrgMemoryClient",
    "RpcTimeoutError",
    "ServerError",
    "ThrottledError",
    "ToolCallError",
    "validated",
]


def backoff_s(attempt: int, base: float = BACKOFF_BASE_S, cap: float = BACKOFF_MAX_S) -> float:
    """Full-jitter exponential backoff before retry ``attempt`` (0-based)."""
    return random.uniform(0, min(cap, base * 2**attempt))


class _TextBody(BaseModel):
    text: str


class OrgMemoryClient(ProposalCalls):
    def __init__(
        self,
        *,
        transport: Transport,
        http_url: str | None = None,
        api_key: str | None = None,
        bootstrap_servers: str | None = None,
        namespace: str = "om",
        client_id: str | None = None,
        timeout: float = 10.0,
        retries: int = 1,
        reply_retention_ms: int = 10 * 60 * 1000,
        delete_reply_topic: bool = True,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if transport == "http" and not (http_url or http_client):
            raise ConfigurationError("HTTP transport needs http_url", setting="http_url")
        if transport == "kafka" and not bootstrap_servers:
            raise ConfigurationError("Kafka transport needs bootstrap_servers", setting="bootstrap_servers")
        self._settings: dict[str, Any] = {
            "transport": transport,
            "http_url": http_url,
            "api_key": api_key,
            "bootstrap_servers": bootstrap_servers,
            "namespace": namespace,
            "timeout": timeout,
            "retries": retries,
            "reply_retention_ms": reply_retention_ms,
            "delete_reply_topic": delete_reply_topic,
        }
        self.transport = transport
        self.timeout = timeout
        self.retries = max(0, retries)
        self.namespace = namespace
        self.client_id = client_id or f"c{uuid.uuid4().hex[:16]}"
        self.reply_topic = reply_topic(namespace, self.client_id)
        self.request_topic = f"{namespace}.rpc.retrieve.v1"
        self._api_key = api_key
        self._http_url = http_url
        self._http = http_client
        self._bootstrap = bootstrap_servers
        self._retention_ms = reply_retention_ms
        self._delete_reply_topic = delete_reply_topic
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[str, asyncio.Future[RpcReply]] = {}

    @classmethod
    def http(cls, url: str, api_key: str, **kwargs: Any) -> OrgMemoryClient:
        return cls(transport="http", http_url=url, api_key=api_key, **kwargs)

    @classmethod
    def kafka(cls, bootstrap_servers: str, **kwargs: Any) -> OrgMemoryClient:
        return cls(transport="kafka", bootstrap_servers=bootstrap_servers, **kwargs)

    def copy(self) -> OrgMemoryClient:
        """A new, unstarted client with the same settings (its own connections and client id): what a
        second event loop — e.g. ``OrgMemorySyncClient`` — needs. Not for a client built on a given
        ``http_client``."""
        if self._settings["transport"] == "http" and not self._settings["http_url"]:
            raise ConfigurationError("copy() needs a client built with http_url, not http_client", setting="http_url")
        return OrgMemoryClient(**self._settings)

    # ---- lifecycle --------------------------------------------------------------------------------
    async def start(self) -> None:
        if self.transport == "http":
            if self._http is None:
                self._http = httpx.AsyncClient(base_url=self._http_url or "", timeout=self.timeout)
            return
        await self._start_kafka()

    async def close(self) -> None:
        await self._close_kafka()
        if self._http is not None:
            await self._http.aclose()

    async def __aenter__(self) -> OrgMemoryClient:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # ---- tool calls -------------------------------------------------------------------------------
    async def retrieve_context(
        self,
        request: RetrieveContextRequest | dict[str, Any],
        *,
        principal_id: str | None = None,
        groups: Sequence[str] = (),
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call budget
    ) -> RetrieveContextResponse:
        req = validated(RetrieveContextRequest, request)
        return await self._call("retrieve_context", req, RetrieveContextResponse, principal_id, groups, timeout)

    async def search_knowledge_base(
        self,
        request: SearchKnowledgeBaseRequest | dict[str, Any],
        *,
        principal_id: str | None = None,
        groups: Sequence[str] = (),
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call budget
    ) -> SearchKnowledgeBaseResponse:
        req = validated(SearchKnowledgeBaseRequest, request)
        return await self._call(
            "search_knowledge_base", req, SearchKnowledgeBaseResponse, principal_id, groups, timeout
        )

    async def preload(
        self,
        request: PreloadRequest | dict[str, Any],
        *,
        principal_id: str | None = None,
        groups: Sequence[str] = (),
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call budget
    ) -> PreloadResponse:
        """The block to inject before a turn: top memories, then passages, packed with citations."""
        req = validated(PreloadRequest, request)
        return await self._call("preload", req, PreloadResponse, principal_id, groups, timeout)

    async def _call(
        self,
        tool: str,
        req: BaseModel,
        model: type[M],
        principal_id: str | None,
        groups: Sequence[str],
        timeout: float | None,  # noqa: ASYNC109 - a per-call budget
    ) -> M:
        budget = timeout or self.timeout
        if self.transport == "http":
            return await self._retrying(
                tool, lambda: self._http_call("POST", f"/tools/{tool}", req, model, principal_id, groups, budget)
            )
        return await self._retrying(tool, lambda: self._kafka_call(tool, req, model, principal_id, groups, budget))

    async def _retrying(self, what: str, attempt_fn: Callable[[], Awaitable[T]]) -> T:
        """Bounded retries with full-jitter backoff for timeouts and 5xx; other errors surface at once."""
        for attempt in range(self.retries + 1):
            try:
                return await attempt_fn()
            except (RpcTimeoutError, ServerError) as exc:
                if attempt == self.retries:
                    raise
                delay = backoff_s(attempt)
                log.info("%s: %s (attempt %d/%d), retrying in %.2fs", what, exc, attempt + 1, self.retries + 1, delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    # ---- memory writes (HTTP or Kafka request/reply; the server checks scope and throttles) -----------
    async def remember(
        self,
        request: RememberRequest | dict[str, Any],
        *,
        principal_id: str,
        groups: Sequence[str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call budget
    ) -> RememberResponse:
        """Write a memory as ``principal_id`` (``POST /v1/memories``, or the ``remember`` RPC tool);
        idempotent per source event."""
        req = validated(RememberRequest, request)
        budget = timeout or self.timeout
        if self.transport == "http":
            return await self._retrying(
                "remember",
                lambda: self._http_call("POST", "/v1/memories", req, RememberResponse, principal_id, groups, budget),
            )
        return await self._retrying(
            "remember", lambda: self._kafka_call("remember", req, RememberResponse, principal_id, groups or (), budget)
        )

    async def forget(
        self,
        memory_id: str,
        *,
        principal_id: str,
        workspace: str = "default",
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call budget
    ) -> ForgetResponse:
        """Tombstone a memory (``DELETE /v1/memories/{id}``, or the ``forget`` RPC tool); only its author
        (or, over HTTP, an admin) may."""
        budget = timeout or self.timeout
        if self.transport == "http":
            path = f"/v1/memories/{quote(memory_id, safe='')}?{urlencode({'workspace': workspace})}"
            return await self._retrying(
                "forget", lambda: self._http_call("DELETE", path, None, ForgetResponse, principal_id, None, budget)
            )
        req = ForgetRequest(memory_id=memory_id, workspace=workspace)
        return await self._retrying(
            "forget", lambda: self._kafka_call("forget", req, ForgetResponse, principal_id, (), budget)
        )

    async def remember_batch(
        self,
        memories: Sequence[RememberRequest | dict[str, Any]],
        *,
        principal_id: str,
        groups: Sequence[str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call budget
    ) -> RememberBatchResponse:
        """Write several memories (typically one session's) as one write for the server's throttle
        (``POST /v1/memories/batch``); every item is checked before any is written. HTTP only."""
        req = validated(RememberBatchRequest, {"memories": [validated(RememberRequest, m) for m in memories]})
        self._http_only("remember_batch")
        budget = timeout or self.timeout
        return await self._retrying(
            "remember_batch",
            lambda: self._http_call(
                "POST", "/v1/memories/batch", req, RememberBatchResponse, principal_id, groups, budget
            ),
        )

    # ---- memory verbs: list / get / update / whoami (HTTP) ----------------------------------------------
    async def list_memories(
        self,
        request: ListMemoriesRequest | dict[str, Any] | None = None,
        *,
        principal_id: str,
        groups: Sequence[str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call budget
    ) -> MemoryList:
        """My memories (no ``scope``), my private ones (``scope="user"``) or those shared with a group I hold
        (``scope="group:<uuid>"``); newest first, ``limit`` per page, ``cursor`` = the last ``next_cursor``."""
        req = validated(ListMemoriesRequest, request or {})
        self._http_only("list_memories")
        query = urlencode({k: v for k, v in req.model_dump().items() if v is not None})
        return await self._retrying(
            "list_memories",
            lambda: self._http_call(
                "GET", f"/v1/memories?{query}", None, MemoryList, principal_id, groups, timeout or self.timeout
            ),
        )

    async def get_memory(
        self,
        memory_id: str,
        *,
        principal_id: str,
        groups: Sequence[str] | None = None,
        workspace: str = "default",
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call budget
    ) -> MemoryDetail:
        """One memory I may see, with its version history (oldest first)."""
        req = validated(GetMemoryRequest, {"memory_id": memory_id, "workspace": workspace})
        self._http_only("get_memory")
        path = f"/v1/memories/{quote(req.memory_id, safe='')}?{urlencode({'workspace': req.workspace})}"
        return await self._retrying(
            "get_memory",
            lambda: self._http_call("GET", path, None, MemoryDetail, principal_id, groups, timeout or self.timeout),
        )

    async def update_memory(
        self,
        memory_id: str,
        text: str,
        *,
        principal_id: str,
        groups: Sequence[str] | None = None,
        workspace: str = "default",
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call budget
    ) -> UpdateMemoryResponse:
        """A new version of my memory that supersedes the current one (same id and scope; history kept)."""
        req = validated(UpdateMemoryRequest, {"memory_id": memory_id, "text": text, "workspace": workspace})
        self._http_only("update_memory")
        path = f"/v1/memories/{quote(req.memory_id, safe='')}/versions?{urlencode({'workspace': req.workspace})}"
        body = _TextBody(text=req.text)
        return await self._retrying(
            "update_memory",
            lambda: self._http_call(
                "POST", path, body, UpdateMemoryResponse, principal_id, groups, timeout or self.timeout
            ),
        )

    async def whoami(
        self,
        *,
        principal_id: str | None = None,
        groups: Sequence[str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call budget
    ) -> WhoAmIResponse:
        """My principal, my groups (from the directory unless ``groups`` is given) and the scopes I may write."""
        self._http_only("whoami")
        return await self._retrying(
            "whoami",
            lambda: self._http_call(
                "GET", "/v1/whoami", None, WhoAmIResponse, principal_id, groups, timeout or self.timeout
            ),
        )
