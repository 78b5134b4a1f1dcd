"""Every door of one running API + retriever, called the same way: HTTP (``POST /tools/<name>`` and the
catalogue's GET routes), MCP (the real ``mcp`` SDK client over streamable HTTP) and Kafka request/reply
(a real producer and reply consumer). ``Answer`` is what came back, in one form for every door."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from mcp import ClientSession

from retriever.rpc import CORRELATION_ID, DEADLINE, REPLY_TO, reply_topic, sign_rpc
from services.settings import Settings
from tests.integration.agents_helpers import mcp_session


@dataclass(frozen=True)
class Answer:
    door: str
    status: int  # HTTP status; MCP: 200, or the "(status N)" of a tool error; RPC: 200 or the error's status
    body: dict[str, Any] | None  # the result (structured content for MCP)
    text: str  # everything the caller received, as text (what a leak check scans)
    field: str | None = None  # the field an error names


@dataclass(frozen=True)
class Who:
    """A crafted viewer: HTTP/MCP headers, and the RPC viewer the same trick becomes on the Kafka door
    (``None``: the trick has no Kafka form, e.g. a wrong API key — the topic ACL authenticates there)."""

    label: str
    headers: Mapping[str, str]
    rpc: dict[str, Any] | None = field(default=None)


def rpc_viewer(headers: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if headers.get("X-Principal-Id") is not None:
        out["principal_id"] = headers["X-Principal-Id"]
    if headers.get("X-Principal-Groups") is not None:
        out["groups"] = [g.strip() for g in headers["X-Principal-Groups"].split(",")]
    return out


def _error_field(detail: Any) -> str | None:
    return detail.get("field") if isinstance(detail, dict) else None


def on_the_wire(headers: Mapping[str, str]) -> dict[bytes, bytes]:
    """The header lines as UTF-8 bytes (lookalikes are not ASCII)."""
    return {k.encode(): v.encode() for k, v in headers.items()}


def crosses_a_socket(headers: Mapping[str, str]) -> bool:
    """False when a header value has a line break or blanks around it: a conforming client refuses to send it, and
    over a raw socket no HTTP/1.1 server receives it as written (it strips the blanks, RFC 9110 §5.5, so
    ``"test-key "`` *is* the key; a line break splits the value into the headers it injects) — so the viewer it
    crafts is not an outsider there. ``tests/reliability/test_acl_probe.py`` hands such values to the app in-process."""
    return all(v == v.strip(" \t") and "\r" not in v and "\n" not in v for v in headers.values())


async def http_call(client: httpx.AsyncClient, method: str, path: str, body: Any, who: Who) -> Answer:
    r = await client.request(method, path, json=body, headers=on_the_wire(who.headers))
    try:
        data = r.json()
    except ValueError:
        data = None
    field_ = _error_field(data.get("detail")) if r.status_code >= 400 and isinstance(data, dict) else None
    ok = data if r.status_code < 400 and isinstance(data, dict) else None
    return Answer("http", r.status_code, ok, r.text, field_)


def _mcp_status(text: str) -> tuple[int, str | None]:
    status = 400
    if text.endswith(")") and "(status " in text:
        with contextlib.suppress(ValueError):
            status = int(text.rsplit("(status ", 1)[1].rstrip(")"))
    head = text.split(": ", 1)[0] if ": " in text else None
    return status, head


async def mcp_call(session: ClientSession, tool: str, args: dict[str, Any]) -> Answer:
    r = await session.call_tool(tool, args)
    text = "\n".join(getattr(c, "text", "") for c in r.content)
    structured = r.structured_content if isinstance(r.structured_content, dict) else None
    everything = text + json.dumps(structured or {})
    if r.is_error:
        err = (structured or {}).get("error")
        if isinstance(err, dict):
            return Answer("mcp", int(err.get("status", 500)), None, everything, err.get("field"))
        status, field_ = _mcp_status(text)
        return Answer("mcp", status, None, everything, field_)
    return Answer("mcp", 200, structured, everything)


class RpcDoor:
    """A Kafka requester on ``<ns>.rpc.retrieve.v1`` with its own reply topic."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.key = settings.service_api_key.get_secret_value() if settings.service_api_key else ""
        self.reply_topic = reply_topic(settings.topic_namespace, f"doors-{uuid.uuid4().hex[:10]}")
        self.pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.producer: AIOKafkaProducer | None = None
        self.consumer: AIOKafkaConsumer | None = None
        self.reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        boot = self.settings.kafka_bootstrap_servers
        self.producer = AIOKafkaProducer(bootstrap_servers=boot)
        await self.producer.start()
        self.consumer = AIOKafkaConsumer(bootstrap_servers=boot, group_id=None, auto_offset_reset="latest")
        admin_topic = self.reply_topic
        admin = AIOKafkaAdminClient(bootstrap_servers=boot)
        await admin.start()
        try:
            with contextlib.suppress(Exception):
                await admin.create_topics([NewTopic(admin_topic, num_partitions=1, replication_factor=1)])
        finally:
            await admin.close()
        await self.consumer.start()
        tp = TopicPartition(admin_topic, 0)
        self.consumer.assign([tp])
        await self.consumer.seek_to_end(tp)
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.consumer is not None
        async for msg in self.consumer:
            cid = dict(msg.headers).get(CORRELATION_ID, b"").decode()
            fut = self.pending.get(cid)
            if fut is not None and not fut.done() and msg.value is not None:
                fut.set_result(json.loads(msg.value))

    async def stop(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(BaseException):
                await self.reader
        if self.consumer is not None:
            await self.consumer.stop()
        if self.producer is not None:
            await self.producer.stop()

    async def call(self, tool: str, args: dict[str, Any], viewer: dict[str, Any], timeout: float = 30) -> Answer:
        assert self.producer is not None
        cid = uuid.uuid4().hex
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[cid] = fut
        body = json.dumps({"tool": tool, "viewer": viewer, "request": args}).encode()
        deadline = str(int((time.time() + timeout) * 1000))
        try:
            await self.producer.send_and_wait(
                self.settings.topic("rpc.retrieve"),
                body,
                key=cid.encode(),
                headers=[
                    (REPLY_TO, self.reply_topic.encode()),
                    (CORRELATION_ID, cid.encode()),
                    (DEADLINE, deadline.encode()),
                    # signed like OrgMemoryClient does, with the test settings' key (single-key dev mode)
                    *sign_rpc(self.key, request_id=cid, reply_to=self.reply_topic, deadline=deadline, body=body),
                ],
            )
            reply = await asyncio.wait_for(fut, timeout)
        finally:
            self.pending.pop(cid, None)
        text = json.dumps(reply)
        if reply.get("ok"):
            return Answer("rpc", 200, reply.get("result"), text)
        err = reply.get("error") or {}
        return Answer("rpc", int(err.get("status", 500)), None, text, err.get("field"))


@contextlib.asynccontextmanager
async def rpc_door(settings: Settings) -> AsyncIterator[RpcDoor]:
    door = RpcDoor(settings)
    await door.start()
    try:
        yield door
    finally:
        await door.stop()


async def mcp_calls(url: str, who: Who, calls: list[tuple[str, dict[str, Any]]]) -> list[Answer]:
    """``calls`` over one MCP session as ``who``; a session the server refuses to open (401 before any tool
    runs) answers every call with that refusal."""
    opened = False
    answers: list[Answer] = []
    try:
        async with mcp_session(url, dict(who.headers)) as session:
            opened = True
            for tool, args in calls:
                answers.append(await mcp_call(session, tool, args))
    except Exception as exc:
        if opened:
            raise
        return [Answer("mcp", 401, None, f"{type(exc).__name__}") for _ in calls]
    return answers
