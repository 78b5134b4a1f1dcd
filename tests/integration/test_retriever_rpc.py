"""Kafka request/reply on the real broker: concurrency, structured errors, dead letters, restart + retry."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from orgmem_sdk.client import OrgMemoryClient, RpcTimeoutError, ToolCallError
from retriever.handler import RpcHandler
from services.serve import start_runtime, stop_runtime
from services.settings import Settings
from tests.integration.helpers import envelope, eventually, produce
from tests.integration.retriever_fixtures import VIEWERS, hierarchy_file, load_corpus, wait_embedded


async def test_hundred_parallel_requests_each_get_their_own_reply(
    settings_factory: Any, pipeline: Any, tmp_path: Path
) -> None:
    s: Settings = await settings_factory(org_hierarchy_path=hierarchy_file(tmp_path))
    await pipeline("ingest", "embed", "retrieve", settings_override=s)
    group = f"group:{uuid.uuid4()}"
    words = [f"tok{uuid.uuid4().hex[:8]}" for _ in range(100)]
    await produce(
        s,
        *(envelope(f"doc-{i}", f"Release note {i}: {w} shipped.", principals=[group]) for i, w in enumerate(words)),
    )
    await wait_embedded(s, 100)
    async with OrgMemoryClient.kafka(
        s.kafka_bootstrap_servers, namespace=s.topic_namespace, timeout=30, api_key="test-key"
    ) as om:
        replies = await asyncio.gather(*(om.retrieve_context({"query": w, "limit": 3}, groups=[group]) for w in words))
        for i, reply in enumerate(replies):
            assert reply.passages[0].external_id == f"doc-{i}"
        kb = await om.search_knowledge_base({"query": words[7]}, groups=[group])
        assert kb.passages[0].external_id == "doc-7"
        nothing = await om.retrieve_context({"query": words[3]})  # no principal -> no private data
        assert nothing.passages == []
        with pytest.raises(ToolCallError) as err:
            await om.retrieve_context({"query": "x", "mode": "graph_first"}, groups=[group])
        assert err.value.status == 422 and err.value.field == "subjects"


async def test_request_without_reply_to_is_dead_lettered(settings: Settings, pipeline: Any) -> None:
    await pipeline("retrieve")
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers)
    await producer.start()
    try:
        await producer.send_and_wait(
            settings.topic("rpc.retrieve"),
            b'{"request": {"query": "x"}}',
            headers=[("correlation_id", b"abc")],
        )
        await producer.send_and_wait(
            settings.topic("rpc.retrieve"),
            b'{"request": {"query": "x"}}',
            headers=[("correlation_id", b"abd"), ("reply_to", b"om.envelopes.v1")],
        )
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        settings.topic("dlq.retrieve"),
        bootstrap_servers=settings.kafka_bootstrap_servers,
        auto_offset_reset="earliest",
        group_id=None,
    )
    await consumer.start()
    try:
        got: list[Any] = []

        async def two() -> bool:
            batch = await consumer.getmany(timeout_ms=500)
            got.extend(m for msgs in batch.values() for m in msgs)
            return len(got) >= 2

        await eventually(two, timeout=30)
        fields = sorted(dict(m.headers)["x-dlq-error-field"] for m in got)
        assert fields == [b"reply_to", b"reply_to"]
    finally:
        await consumer.stop()


async def test_retriever_restart_requesters_time_out_then_retry_succeeds(
    settings_factory: Any, pipeline: Any, tmp_path: Path
) -> None:
    s: Settings = await settings_factory(org_hierarchy_path=hierarchy_file(tmp_path))
    await pipeline("ingest", "embed", settings_override=s)
    await load_corpus(s)
    alice = VIEWERS["alice"]
    retriever = await start_runtime(s, ["retrieve"])
    async with OrgMemoryClient.kafka(
        s.kafka_bootstrap_servers, namespace=s.topic_namespace, timeout=20, retries=0, api_key="test-key"
    ) as om:
        first = await om.retrieve_context({"query": "quintrel"}, principal_id=alice.principal, groups=alice.groups)
        assert first.passages[0].external_id == "team-1"
        await stop_runtime(retriever)  # the retriever goes away; requests now sit unanswered
        in_flight = [
            asyncio.create_task(
                om.retrieve_context(
                    {"query": "quintrel"}, principal_id=alice.principal, groups=alice.groups, timeout=1.5
                )
            )
            for _ in range(5)
        ]
        results = await asyncio.gather(*in_flight, return_exceptions=True)
        assert all(isinstance(r, RpcTimeoutError) for r in results), results
        assert om._pending == {}
        retriever = await start_runtime(s, ["retrieve"])  # back; the expired requests are dropped
        try:
            om.retries = 3
            again = await om.retrieve_context(
                {"query": "quintrel"}, principal_id=alice.principal, groups=alice.groups, timeout=15
            )
            assert again.passages[0].external_id == "team-1"
            handler = retriever.handlers["retrieve"]
            assert isinstance(handler, RpcHandler)
            await eventually(lambda: asyncio.sleep(0, handler.expired >= 5), timeout=20)
        finally:
            await stop_runtime(retriever)
