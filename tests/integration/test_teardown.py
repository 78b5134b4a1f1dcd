"""Teardown of a throwaway namespace (eval runs, every integration test) removes exactly its own
schema (with rebuild generations), topics and bucket — and refuses the deployment's defaults."""

from __future__ import annotations

import asyncpg
import pytest
from aiokafka.admin import AIOKafkaAdminClient

from services.db.migrate import migrate
from services.errors import ObjectStoreError
from services.kafka.topics import ensure_topics
from services.objectstore.factory import build_object_store
from services.objectstore.s3 import S3ObjectStore
from services.ops.teardown import delete_topics, drop_namespace, drop_schema
from tests.integration.conftest import make_settings


async def _topics(bootstrap: str) -> set[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


async def test_drop_namespace_removes_only_its_own(stack_env: dict[str, str]) -> None:
    mine, other = make_settings(stack_env), make_settings(stack_env)
    for s in (mine, other):
        await migrate(s.database_url, s.db_schema)
        await ensure_topics(s)
    await migrate(mine.database_url, f"{mine.db_schema}_g2")  # a rebuild generation of mine
    store = build_object_store(mine)
    assert isinstance(store, S3ObjectStore)
    await store.put("batch/0001.jsonl", b"{}")

    await drop_namespace(
        mine.database_url, mine.kafka_bootstrap_servers, schema=mine.db_schema, namespace=mine.topic_namespace
    )
    await store.drop_bucket()

    conn = await asyncpg.connect(mine.database_url)
    try:
        schemas = {r["nspname"] for r in await conn.fetch("SELECT nspname FROM pg_namespace")}
    finally:
        await conn.close()
    assert mine.db_schema not in schemas and f"{mine.db_schema}_g2" not in schemas
    assert other.db_schema in schemas
    topics = await _topics(mine.kafka_bootstrap_servers)
    assert not [t for t in topics if t.startswith(f"{mine.topic_namespace}.")]
    assert [t for t in topics if t.startswith(f"{other.topic_namespace}.")]
    gone = build_object_store(mine)
    assert isinstance(gone, S3ObjectStore)
    with pytest.raises(ObjectStoreError):  # the bucket is gone
        await gone.get("batch/0001.jsonl")
    assert not gone._client.bucket_exists(mine.s3_bucket)
    await drop_namespace(
        other.database_url, other.kafka_bootstrap_servers, schema=other.db_schema, namespace=other.topic_namespace
    )


async def test_refuses_the_deployment_defaults(stack_env: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="refusing"):
        await drop_schema(stack_env["DATABASE_URL"], "orgmem")
    with pytest.raises(ValueError, match="refusing"):
        await drop_schema(stack_env["DATABASE_URL"], "public")
    with pytest.raises(ValueError, match="refusing"):
        await delete_topics(stack_env["KAFKA_BOOTSTRAP_SERVERS"], "om")
    with pytest.raises(ValueError, match="refusing"):
        await delete_topics(stack_env["KAFKA_BOOTSTRAP_SERVERS"], "")
