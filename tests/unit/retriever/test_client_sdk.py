"""OrgMemoryClient over HTTP against an in-process fake transport: typed errors, bounded jittered
retries for 5xx and timeouts (never for 4xx), remember/forget paths and headers."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from orgmem_sdk import client as client_mod
from orgmem_sdk.client import (
    AuthenticationError,
    ForbiddenError,
    InvalidRequestError,
    OrgMemoryClient,
    RpcTimeoutError,
    ServerError,
    ThrottledError,
)
from orgmem_sdk.langchain import to_documents
from orgmem_sdk.models import RetrieveContextResponse, RpcError, RpcReply, RpcRequest

USER = f"user:{uuid.uuid4()}"


def _client(handler: Any, retries: int = 2) -> OrgMemoryClient:
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler), base_url="http://t")
    return OrgMemoryClient(transport="http", http_client=http, api_key="k", retries=retries)


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    async def instant(_: float) -> None:
        return None

    monkeypatch.setattr(asyncio, "sleep", instant)  # the client's backoff sleeps


def test_backoff_is_bounded_full_jitter() -> None:
    for attempt in range(10):
        d = client_mod.backoff_s(attempt)
        assert 0 <= d <= min(client_mod.BACKOFF_MAX_S, client_mod.BACKOFF_BASE_S * 2**attempt)


@pytest.mark.parametrize(
    ("status", "error"),
    [(401, AuthenticationError), (403, ForbiddenError), (422, InvalidRequestError), (429, ThrottledError)],
)
async def test_4xx_typed_and_not_retried(status: int, error: type[Exception]) -> None:
    calls = []

    def handler(req: httpx.Request) -> httpx.Response:
        calls.append(req)
        return httpx.Response(status, json={"detail": {"field": "scope", "msg": "no"}}, headers={"Retry-After": "7"})

    async with _client(handler) as om:
        with pytest.raises(error) as exc:
            await om.remember({"text": "x"}, principal_id=USER)
    assert len(calls) == 1 and exc.value.field == "scope"  # type: ignore[attr-defined]
    if status == 429:
        assert exc.value.retry_after_s == 7  # type: ignore[attr-defined]


async def test_5xx_and_timeouts_retried_then_surface() -> None:
    calls = []

    def handler(req: httpx.Request) -> httpx.Response:
        calls.append(req)
        if len(calls) == 1:
            raise httpx.ReadTimeout("slow", request=req)
        if len(calls) == 2:
            return httpx.Response(503, json={"detail": {"msg": "db down"}})
        return httpx.Response(200, json={"passages": []})

    async with _client(handler) as om:
        got = await om.retrieve_context({"query": "q"}, principal_id=USER)
    assert got.passages == [] and len(calls) == 3

    always = []

    def down(req: httpx.Request) -> httpx.Response:
        always.append(req)
        return httpx.Response(502, json={"detail": {"msg": "vendor"}})

    async with _client(down, retries=1) as om:
        with pytest.raises(ServerError):
            await om.retrieve_context({"query": "q"})
    assert len(always) == 2

    def slow(req: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=req)

    async with _client(slow, retries=0) as om:
        with pytest.raises(RpcTimeoutError):
            await om.retrieve_context({"query": "q"})


async def test_remember_forget_requests() -> None:
    seen: list[httpx.Request] = []
    mid = str(uuid.uuid4())

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        meta = {"envelope_id": str(uuid.uuid4()), "topic": "om.envelopes.v1", "partition": 0, "offset": 1}
        if req.method == "POST":
            return httpx.Response(
                202, json={"memory_id": mid, "scope": "user", "principals": [USER], "key": "k"} | meta
            )
        return httpx.Response(202, json={"memory_id": mid, "forgotten": True} | meta)

    async with _client(handler) as om:
        w = await om.remember({"text": "note", "source": {"session_id": "s"}}, principal_id=USER)
        f = await om.forget(w.memory_id, principal_id=USER, workspace="ws")
    assert f.forgotten and seen[0].url.path == "/v1/memories"
    assert json.loads(seen[0].content)["source"]["session_id"] == "s"
    assert seen[0].headers["x-principal-id"] == USER and "x-principal-groups" not in seen[0].headers
    assert seen[1].method == "DELETE" and seen[1].url.path == f"/v1/memories/{mid}"
    assert seen[1].url.params["workspace"] == "ws"


async def test_memory_writes_over_kafka_are_rpc_tool_calls() -> None:
    """Over Kafka, remember/forget are ``RpcRequest`` tool calls carrying the viewer; a structured 429
    reply surfaces as ``ThrottledError`` with its retry time."""
    sent: list[RpcRequest] = []
    om = OrgMemoryClient.kafka("127.0.0.1:1", retries=0)

    class Producer:
        async def send_and_wait(self, topic: str, value: bytes, **_: Any) -> None:
            rpc = RpcRequest.model_validate_json(value)
            sent.append(rpc)
            cid = next(iter(om._pending))
            reply = RpcReply(
                ok=False,
                error=RpcError(
                    type="MemoryWriteError",
                    message="slow down",
                    status=429,
                    field="source.session_id",
                    retry_after_s=4.5,
                ),
            )
            om._pending[cid].set_result(reply)

    om._producer = Producer()
    with pytest.raises(ThrottledError) as exc:
        await om.remember({"text": "note", "scope": "user"}, principal_id=USER, groups=["group:" + str(uuid.uuid4())])
    assert exc.value.retry_after_s == 4.5 and exc.value.field == "source.session_id"
    with pytest.raises(ThrottledError):
        await om.forget(str(uuid.uuid4()), principal_id=USER, workspace="ws")
    assert [r.tool for r in sent] == ["remember", "forget"]
    assert sent[0].viewer.principal_id == USER and sent[0].request["text"] == "note"
    assert sent[1].request["workspace"] == "ws" and sent[1].viewer.groups is None


def test_langchain_documents_carry_citations() -> None:
    resp = RetrieveContextResponse.model_validate(
        {
            "passages": [
                {
                    "document_id": str(uuid.uuid4()),
                    "source_system": "slack",
                    "external_id": "m1",
                    "chunk_id": str(uuid.uuid4()),
                    "text": "alpha",
                    "snippet": "alpha",
                    "score": 0.5,
                    "scope": "team",
                    "event_time": datetime(2024, 1, 1, tzinfo=UTC).isoformat(),
                    "kind": "message",
                    "url": "https://x/1",
                }
            ]
        }
    )
    (doc,) = to_documents(resp)
    assert doc.page_content == "alpha"
    assert doc.metadata["citation"] == 1 and doc.metadata["url"] == "https://x/1"
    assert doc.metadata["source_system"] == "slack" and doc.metadata["event_time"].startswith("2024-01-01")
