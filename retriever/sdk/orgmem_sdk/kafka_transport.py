"""The SDK client's Kafka request/reply transport: on ``start()`` its own reply topic
``<ns>.rpc.reply.<client-id>.v1`` (one partition, short retention) read from its end with a group-less consumer;
each request signed with the API key and resolved by ``correlation_id``; a late reply to an abandoned attempt is
ignored. A mixin of :class:`orgmem_sdk.client.OrgMemoryClient`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Literal, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from aiokafka.structs import TopicPartition
from pydantic import BaseModel

from orgmem_sdk.errors import ConfigurationError, RpcTimeoutError, ToolCallError, error_for
from orgmem_sdk.models import RpcReply, RpcRequest, RpcViewer
from orgmem_sdk.signing import sign_rpc

REPLY_TO = "reply_to"
CORRELATION_ID = "correlation_id"
DEADLINE = "deadline"
CLIENT_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,80}$")
log = logging.getLogger("orgmem.client")
M = TypeVar("M", bound=BaseModel)


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


class KafkaTransport:
    """The request/reply wire (the server's ``retriever/rpc.py`` speaks the same)."""

    transport: Literal["http", "kafka"]
    client_id: str
    reply_topic: str
    request_topic: str
    _api_key: str | None
    _bootstrap: str | None
    _retention_ms: int
    _delete_reply_topic: bool
    _producer: AIOKafkaProducer | None
    _consumer: AIOKafkaConsumer | None
    _reader: asyncio.Task[None] | None
    _pending: dict[str, asyncio.Future[RpcReply]]

    async def _start_kafka(self) -> None:
        topic = NewTopic(
            self.reply_topic, 1, 1, topic_configs={"retention.ms": str(self._retention_ms), "cleanup.policy": "delete"}
        )
        async with kafka_admin(self._bootstrap or "") as admin:
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics([topic])
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap, linger_ms=1, acks="all", enable_idempotence=True
        )  # acks=all + idempotence like every producer of the product
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

    async def _close_kafka(self) -> None:
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
