"""SDKs on the real stack: the sync client over HTTP and Kafka, remember/forget, typed errors, and the
LangChain retriever (citations in metadata)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from orgmem_sdk.client import ForbiddenError, InvalidRequestError, OrgMemoryClient
from orgmem_sdk.langchain import OrgMemoryRetriever
from orgmem_sdk.sync_client import OrgMemorySyncClient
from services.api.app import create_app
from services.settings import Settings
from tests.integration.agents_helpers import serve_app
from tests.integration.helpers import eventually
from tests.integration.retriever_fixtures import ALICE, T1, T2, hierarchy_file, load_corpus

ALICE_P, TEAM = f"user:{ALICE}", f"group:{T1}"


@pytest.fixture
async def served(settings_factory: Any, pipeline: Any, tmp_path: Path) -> AsyncIterator[tuple[Settings, str]]:
    s: Settings = await settings_factory(org_hierarchy_path=hierarchy_file(tmp_path))
    rt = await pipeline("ingest", "embed", "retrieve", settings_override=s)
    await load_corpus(s)
    async with serve_app(create_app(rt)) as url:
        yield s, url


async def test_sync_client_both_transports_and_memory(served: tuple[Settings, str]) -> None:
    settings, url = served

    def work() -> tuple[list[str], list[str], str]:
        with OrgMemorySyncClient.http(url, "test-key") as om:
            http_ids = [
                p.external_id
                for p in om.retrieve_context({"query": "quintrel"}, principal_id=ALICE_P, groups=[TEAM]).passages
            ]
            with pytest.raises(ForbiddenError) as exc:
                om.remember({"text": "x", "scope": f"group:{T2}"}, principal_id=ALICE_P, groups=[TEAM])
            assert exc.value.field == "scope"
            with pytest.raises(InvalidRequestError) as early:  # validated by the contract before sending
                om.remember({"text": "x" * 20_001}, principal_id=ALICE_P)
            assert early.value.field == "text" and early.value.status == 422
            with pytest.raises(InvalidRequestError) as bad:  # and by the server
                om.retrieve_context({"query": "who owns it", "mode": "graph_first"}, principal_id=ALICE_P)
            assert bad.value.field == "subjects" and bad.value.status == 422
            mid = om.remember(
                {"text": "The wumpletrap rollout moved to May.", "scope": TEAM, "source": {"event_id": "e1"}},
                principal_id=ALICE_P,
                groups=[TEAM],
            ).memory_id
        with OrgMemorySyncClient.kafka(
            settings.kafka_bootstrap_servers, namespace=settings.topic_namespace, api_key="test-key"
        ) as om:
            kafka_ids = [
                p.external_id
                for p in om.retrieve_context({"query": "quintrel"}, principal_id=ALICE_P, groups=[TEAM]).passages
            ]
        return http_ids, kafka_ids, mid

    http_ids, kafka_ids, mid = await asyncio.to_thread(work)
    assert http_ids[:1] == ["team-1"] and kafka_ids[:1] == ["team-1"]

    mate = f"user:{uuid.uuid4()}"
    async with OrgMemoryClient.http(url, "test-key") as om:

        async def found() -> bool:
            r = await om.retrieve_context({"query": "wumpletrap rollout"}, principal_id=mate, groups=[TEAM])
            return any(p.external_id == mid for p in r.passages)

        await eventually(found, timeout=60, interval=0.5)
        retriever = OrgMemoryRetriever(client=om, principal_id=mate, groups=[TEAM], limit=5)
        docs = await retriever.ainvoke("wumpletrap rollout")
        assert docs[0].metadata["external_id"] == mid and docs[0].metadata["citation"] == 1
        assert docs[0].metadata["source_system"] == "agent" and docs[0].metadata["scope"] == "team"
        outsider = OrgMemoryRetriever(client=om, principal_id=f"user:{uuid.uuid4()}", groups=[f"group:{T2}"])
        assert all(d.metadata["external_id"] != mid for d in await outsider.ainvoke("wumpletrap rollout"))
        with pytest.raises(ForbiddenError):
            await om.forget(mid, principal_id=mate)
        assert (await om.forget(mid, principal_id=ALICE_P)).forgotten

    def sync_langchain() -> list[str]:
        with OrgMemorySyncClient.http(url, "test-key") as sync:
            r = OrgMemoryRetriever(sync_client=sync, principal_id=ALICE_P, groups=[TEAM], limit=3)
            return [d.metadata["external_id"] for d in r.invoke("quintrel")]

    assert (await asyncio.to_thread(sync_langchain))[:1] == ["team-1"]

    # built as the README shows (an async client only): invoke() builds its own sync client
    async with OrgMemoryClient.http(url, "test-key") as om:
        built = OrgMemoryRetriever(client=om, principal_id=ALICE_P, groups=[TEAM], limit=3)
        try:
            sync_docs = await asyncio.to_thread(built.invoke, "quintrel")
            async_docs = await built.ainvoke("quintrel")
        finally:
            built.close()
    assert [d.metadata["external_id"] for d in sync_docs][:1] == ["team-1"]
    assert [d.id for d in sync_docs] == [d.id for d in async_docs]


async def test_memory_writes_over_kafka_request_reply(served: tuple[Settings, str]) -> None:
    """remember/forget as Kafka RPC tool calls: the same scope check, ACL and tombstone as over HTTP."""
    settings, _ = served
    mate, outsider = f"user:{uuid.uuid4()}", f"user:{uuid.uuid4()}"
    async with OrgMemoryClient.kafka(
        settings.kafka_bootstrap_servers, namespace=settings.topic_namespace, api_key="test-key"
    ) as om:
        with pytest.raises(ForbiddenError) as exc:
            await om.remember({"text": "x", "scope": f"group:{T2}"}, principal_id=ALICE_P, groups=[TEAM])
        assert exc.value.field == "scope" and exc.value.status == 403
        with pytest.raises(InvalidRequestError) as bad:
            await om.forget("not-a-uuid", principal_id=ALICE_P)
        assert bad.value.field == "memory_id"
        written = await om.remember(
            {"text": "The glorbix migration is frozen until June.", "scope": TEAM, "source": {"event_id": "k1"}},
            principal_id=ALICE_P,
            groups=[TEAM],
        )
        assert written.principals == [TEAM] and written.topic == settings.topic("envelopes")

        async def seen_by(pid: str, groups: list[str]) -> bool:
            r = await om.retrieve_context({"query": "glorbix migration"}, principal_id=pid, groups=groups)
            return any(p.external_id == written.memory_id for p in r.passages)

        await eventually(lambda: seen_by(mate, [TEAM]), timeout=60, interval=0.5)
        assert not await seen_by(outsider, [f"group:{T2}"])
        with pytest.raises(ForbiddenError):
            await om.forget(written.memory_id, principal_id=mate)
        assert (await om.forget(written.memory_id, principal_id=ALICE_P)).forgotten

        async def gone() -> bool:
            return not await seen_by(mate, [TEAM])

        await eventually(gone, timeout=60, interval=0.5)
