"""Retriever stage wiring (catalogue entry ``retrieve``): group ``om-retrieve`` on ``<ns>.rpc.retrieve.v1``,
its own request/reply subscriber (``retriever/handler.py``) instead of the batch wiring."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from faststream import AckPolicy
from faststream.kafka import KafkaMessage

from retriever.handler import RpcHandler, ToolCall
from retriever.wiring import get_service
from services.credentials import KeyStore
from services.directory import load_static_members
from services.kafka.decode import safe_batch_parser
from services.kafka.delivery import DeadLetters
from services.kafka.records import from_consumer_records
from services.kafka.topics import dlq_topic
from services.runtime import Runtime
from services.stagekit import Stage

MAX_RECORDS = 128
log = logging.getLogger("orgmem.retriever.rpc")

Tools = Callable[[Runtime], Mapping[str, ToolCall]]
"""The tool catalogue's dispatch table for a runtime (the top floor's ``services.api.catalogue.rpc_tools``)."""


def build_handler(rt: Runtime, dead_letters: DeadLetters, tools: Tools) -> RpcHandler:
    handler = RpcHandler(
        get_service(rt), rt.publisher, dead_letters, rt.settings.topic_namespace, tools=tools(rt), keys=rpc_keys(rt)
    )
    handler.static_members = load_static_members(rt.settings.org_hierarchy_path)
    return handler


def rpc_keys(rt: Runtime) -> KeyStore:
    """Keys that may sign requests: ``api_keys`` rows with the ``agent`` scope, and ``SERVICE_API_KEY``
    (single-key development mode, key id ``dev``) when it is set."""
    s = rt.settings
    dev = s.service_api_key.get_secret_value() if s.service_api_key else None
    if dev:
        log.warning("single-key development mode: requests signed with SERVICE_API_KEY (key id 'dev') are served")
    return KeyStore(lambda: rt.pool, dev, ttl_s=s.api_key_cache_s)


async def _passthrough_decoder(msg: Any) -> Any:
    return msg.body


def subscribe(rt: Runtime, stage: Stage, tools: Tools) -> RpcHandler:
    s = rt.settings
    handler = build_handler(rt, DeadLetters(rt.publisher, dlq_topic(s, stage.name), stage.name), tools)

    @rt.broker.subscriber(
        stage.input_topic(s),
        group_id=stage.group(s),
        batch=True,
        max_records=stage.max_records(s),
        batch_timeout_ms=20,
        ack_policy=AckPolicy.ACK,
        auto_offset_reset="earliest",
        decoder=_passthrough_decoder,
        parser=safe_batch_parser,
        title=f"{stage.name}:{stage.input_topic(s)}",
        description=stage.description,
    )
    async def consume(body: Any, message: KafkaMessage) -> None:
        await handler(from_consumer_records(message.raw_message))

    return handler
