"""``OrgMemoryClient``: the agent-side client — the same tool calls over HTTP or Kafka request/reply.

Kafka: on ``start()`` the client creates its own reply topic ``<ns>.rpc.reply.<client-id>.v1`` (one
partition, short retention), reads it from its end with a group-less consumer, and resolves futures
keyed by ``correlation_id``. A call that gets no reply within ``timeout`` is retried ``retries`` times
with a fresh correlation id (a late reply to an abandoned attempt is ignored), then raises
``RpcTimeoutError``. Structured error replies raise ``ToolCallError`` carrying status, type and field.

    async with OrgMemoryClient.kafka("127.0.0.1:19092", namespace="om", api_key=AGENT_KEY) as om:
        ctx = await om.retrieve_context({"query": "who owns billing?"},
                                        principal_id="user:…", groups=["group:…"])
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Literal, TypeVar
from urllib.parse import quote, urlencode

import httpx
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from aiokafka.structs import TopicPartition
from pydantic import BaseModel, ValidationError

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
    error_for,
)
from orgmem_sdk.models import (
    ForgetRequest,
    ForgetResponse,
    GetMemoryRequest,
    ListMemoriesRequest,
    MemoryDetail,
    MemoryList,
    PreloadRequest,
    PreloadResponse,
    RememberBatchRequest,
    RememberBatchResponse,
    RememberRequest,
    RememberResponse,
    RetrieveContextRequest,
    RetrieveContextResponse,
    RpcReply,
    RpcRequest,
    RpcViewer,
    SearchKnowledgeBaseRequest,
    SearchKnowledgeBaseResponse,
    UpdateMemoryRequest,
    UpdateMemoryResponse,
    WhoAmIResponse,
)
from orgmem_sdk.signing import sign_rpc

# the Kafka request/reply wire (the server's retriever/rpc.py speaks the same)
REPLY_TO = "reply_to"
CORRELATION_ID = "correlation_id"
DEADLINE = "deadline"
CLIENT_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,80}$")

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
]


def reply_topic(namespace: str, client_id: str) -> str:
    if not CLIENT_ID_RE.match(client_id):
        raise ConfigurationError(f"client id must match {CLIENT_ID_RE.pattern}, got {client_id!r}", setting="client_id")
    return f"{namespace}.rpc.reply.{client_id}.v1"


@contextlib.asynccontextmanager
async def kafka_admin(bootstrap_servers: str) -> AsyncIterator[AIOKafkaAdminClient]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=30_000)
    try:
        await admin.start()
        yield admin
    finally:
        await admin.close()


def validated(model: type[M], value: BaseModel | dict[str, Any]) -> M:
    """``value`` as ``model``, or ``InvalidRequestError`` (status 422) whose ``field`` is the first error's
    dotted location — the same shape the server answers with; nothing is sent."""
    try:
        return model.model_validate(value.model_dump() if isinstance(value, BaseModel) else value)
    except ValidationError as exc:
        errors = exc.errors()
        field = ".".join(str(p) for p in errors[0]["loc"]) or None if errors else None
        msg = errors[0]["msg"] if errors else str(exc)
        raise InvalidRequestError(
            f"invalid {model.__name__}: {field or 'request'}: {msg}",
            status=422,
            type="ValidationError",
            field=field,
        ) from None


def backoff_s(attempt: int, base: float = BACKOFF_BASE_S, cap: float = BACKOFF_MAX_S) -> float:
    """Full-jitter exponential backoff before retry ``attempt`` (0-based)."""
    return random.uniform(0, min(cap, base * 2**attempt))


class _TextBody(BaseModel):
    text: str


class OrgMemoryClient:
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
        topic = NewTopic(
            self.reply_topic, 1, 1, topic_configs={"retention.ms": str(self._retention_ms), "cleanup.policy": "delete"}
        )
        async with kafka_admin(self._bootstrap or "") as admin:
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics([topic])
        # acks=all + idempotence like every producer of the product (a request survives a leader change)
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap, linger_ms=1, acks="all", enable_idempotence=True
        )
        await self._producer.start()
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="latest",
            fetch_max_wait_ms=50,
        )
        await self._consumer.start()
        tp = TopicPartition(self.reply_topic, 0)
        self._consumer.assign([tp])
        await self._consumer.seek_to_end(tp)
        await self._consumer.position(tp)  # positioned before the first request goes out
        self._reader = asyncio.create_task(self._read_replies(), name=f"orgmem-replies-{self.client_id}")

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        for fut in self._pending.values():
            if not fut.done():
                fut.cancel()
        self._pending.clear()
        if self._consumer is not None:
            await self._consumer.stop()
        if self._producer is not None:
            await self._producer.stop()
        if self.transport == "kafka" and self._delete_reply_topic:
            try:
                async with kafka_admin(self._bootstrap or "") as admin:
                    await admin.delete_topics([self.reply_topic])
            except Exception as exc:  # best effort; the topic's retention is short anyway
                log.warning("could not delete reply topic %s: %s", self.reply_topic, exc)
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

    def _http_only(self, what: str) -> None:
        if self.transport != "http":
            raise ConfigurationError(
                f"{what} is served over HTTP only; build the client with OrgMemoryClient.http(…)", setting="transport"
            )

    async def _http_call(
        self,
        method: str,
        path: str,
        req: BaseModel | None,
        model: type[M],
        principal_id: str | None,
        groups: Sequence[str] | None,
        budget: float,
    ) -> M:
        """One HTTP attempt. ``groups=None`` sends no ``X-Principal-Groups`` (the directory's groups apply)."""
        assert self._http is not None, "call start() first"
        headers = {"X-Api-Key": self._api_key or ""}
        if principal_id:
            headers["X-Principal-Id"] = principal_id
        if groups:
            headers["X-Principal-Groups"] = ",".join(groups)
        what = f"{method} {path.split('?')[0]}"
        try:
            resp = await self._http.request(
                method,
                path,
                content=None if req is None else req.model_dump_json(exclude_none=True),
                headers=headers | {"content-type": "application/json"},
                timeout=budget,
            )
        except httpx.TimeoutException as exc:
            raise RpcTimeoutError(f"{what}: no HTTP response within {budget}s") from exc
        except httpx.TransportError as exc:
            raise ServerError(f"{what}: {type(exc).__name__}: {exc}", status=503, type="ConnectionError") from exc
        if resp.status_code >= 400:
            detail = (
                resp.json().get("detail")
                if resp.headers.get("content-type", "").startswith("application/json")
                else resp.text
            )
            field = detail.get("field") if isinstance(detail, dict) else None
            retry = resp.headers.get("retry-after")
            raise error_for(resp.status_code)(
                f"{what} failed ({resp.status_code}): {json.dumps(detail)[:500]}",
                status=resp.status_code,
                type="HTTPError",
                field=field,
                retry_after_s=float(retry) if retry and retry.isdigit() else None,
            )
        return model.model_validate_json(resp.content)

    async def _kafka_call(
        self,
        tool: str,
        req: BaseModel,
        model: type[M],
        principal_id: str | None,
        groups: Sequence[str],
        budget: float,
    ) -> M:
        assert self._producer is not None, "call start() first"
        cid = uuid.uuid4().hex
        body = RpcRequest(
            tool=tool,
            viewer=RpcViewer(principal_id=principal_id, groups=list(groups) if groups else None),
            request=req.model_dump(mode="json", exclude_none=True),
        )
        fut: asyncio.Future[RpcReply] = asyncio.get_running_loop().create_future()
        self._pending[cid] = fut
        deadline = int((time.time() + budget) * 1000)
        value = body.model_dump_json().encode()
        headers = [
            (REPLY_TO, self.reply_topic.encode()),
            (CORRELATION_ID, cid.encode()),
            (DEADLINE, str(deadline).encode()),
        ]
        if self._api_key:  # the retriever refuses unsigned requests (401 error reply)
            headers += sign_rpc(
                self._api_key, request_id=cid, reply_to=self.reply_topic, deadline=str(deadline), body=value
            )
        try:
            await self._producer.send_and_wait(self.request_topic, value, key=cid.encode(), headers=headers)
            reply = await asyncio.wait_for(fut, budget)
        except TimeoutError as exc:
            raise RpcTimeoutError(f"{tool}: no reply within {budget}s", correlation_id=cid) from exc
        finally:
            self._pending.pop(cid, None)
        if not reply.ok or reply.result is None:
            err = reply.error
            raise error_for(err.status if err else 500)(
                err.message if err else "error reply",
                status=err.status if err else 500,
                type=err.type if err else "error",
                field=err.field if err else None,
                retry_after_s=err.retry_after_s if err else None,
            )
        return model.model_validate(reply.result)

    async def _read_replies(self) -> None:
        assert self._consumer is not None
        async for msg in self._consumer:
            cid = next((v.decode() for k, v in (msg.headers or ()) if k == CORRELATION_ID), None)
            fut = self._pending.get(cid) if cid else None
            if fut is None or fut.done():
                continue  # a late or duplicate reply to an abandoned attempt
            try:
                fut.set_result(RpcReply.model_validate_json(msg.value or b"{}"))
            except Exception as exc:
                fut.set_exception(ToolCallError(f"malformed reply: {exc}", status=502, type="MalformedReply"))
