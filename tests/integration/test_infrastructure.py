"""The infrastructure is real: Apache Kafka survives SIGKILL, pgvector HNSW is used, S3 checks signatures,
readiness names what is down, and the service refuses a schema it was not built for."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from embedder.repository import ensure_hnsw_index
from services.api.app import create_app
from services.db.migrate import check_schema, code_version, migrate
from services.db.vectors import sql_literal, vector_expr
from services.errors import ObjectStoreError, SchemaVersionError
from services.objectstore.s3 import S3ObjectStore
from services.runtime import build_runtime
from services.settings import Settings
from tests.integration.conftest import REPO
from tests.integration.helpers import connect

KAFKA_SH = str(REPO / "deploy" / "kafka.sh")


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_kafka_broker_is_apache_kafka_and_data_survives_sigkill(tmp_path: Path) -> None:
    """A second, private broker (own data dir and ports) so the shared one is not disturbed."""
    env = {
        **os.environ,
        "ORGMEM_STATE_DIR": str(tmp_path),
        "ORGMEM_KAFKA_PORT": "29092",
        "ORGMEM_KAFKA_CONTROLLER_PORT": "29093",
        "ORGMEM_KAFKA_JARS": str(REPO / ".state" / "kafka" / "jars"),
    }
    subprocess.run([KAFKA_SH, "start"], env=env, check=True)
    pidfile = tmp_path / "kafka" / "kafka.pid"
    try:
        pid = int(pidfile.read_text())
        assert " kafka.Kafka " in _cmdline(pid)  # the real Apache Kafka broker main class
        admin = AIOKafkaAdminClient(bootstrap_servers="127.0.0.1:29092")
        await admin.start()
        await admin.create_topics([NewTopic("durable", 1, 1)])
        await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers="127.0.0.1:29092", acks="all", enable_idempotence=True)
        await producer.start()
        md = await producer.send_and_wait("durable", b"survives", key=b"k")
        await producer.stop()

        subprocess.run([KAFKA_SH, "kill"], env=env, check=True)  # SIGKILL
        await asyncio.sleep(0.5)
        assert not Path(f"/proc/{pid}").exists()
        subprocess.run([KAFKA_SH, "start"], env=env, check=True)
        assert int(pidfile.read_text()) != pid

        consumer = AIOKafkaConsumer(
            "durable",
            bootstrap_servers="127.0.0.1:29092",
            auto_offset_reset="earliest",
            group_id=None,
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            got: list[bytes] = []
            for _ in range(30):
                batch = await consumer.getmany(timeout_ms=1000)
                got += [m.value for msgs in batch.values() for m in msgs]
                if got:
                    break
        finally:
            await asyncio.sleep(0)
            await consumer.stop()
        assert got == [b"survives"] and md.offset == 0
    finally:
        subprocess.run([KAFKA_SH, "stop"], env=env, check=False)


async def test_pgvector_hnsw_index_is_created_and_used(settings: Settings) -> None:
    conn = await connect(settings)
    try:
        model = "hash/v1-8"
        index = await ensure_hnsw_index(conn, model, 8)
        doc = uuid.uuid4()
        await conn.execute(
            "INSERT INTO documents (id, workspace, source_system, external_id, kind, event_time)"
            " VALUES ($1, 'w', 's', 'x', 'message', now())",
            doc,
        )
        rows = [(uuid.uuid4(), doc, f"[{','.join(str((i * j) % 7 + 0.1) for j in range(8))}]") for i in range(2000)]
        await conn.executemany(
            "INSERT INTO chunks (id, document_id, workspace, is_parent, ordinal, char_start, char_end, text,"
            " content_hash, event_time, source_system, kind, embedding, embedding_model)"
            f" VALUES ($1, $2, 'w', false, 0, 0, 1, 't', 'h', now(), 's', 'message', $3::vector, {sql_literal(model)})",
            rows,
        )
        await conn.execute("ANALYZE chunks")
        plan = "\n".join(
            r[0]
            for r in await conn.fetch(
                f"EXPLAIN SELECT id FROM chunks WHERE embedding_model = {sql_literal(model)} AND NOT is_parent"
                f" ORDER BY {vector_expr(8)} <=> '[1,0,0,0,0,0,0,0]'::vector(8) LIMIT 10"
            )
        )
        assert index in plan, plan
        ext = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        assert ext >= "0.6"
    finally:
        await conn.close()


async def test_s3_refuses_wrong_credentials_and_accepts_right_ones(stack_env: dict[str, str]) -> None:
    bucket = f"t-{uuid.uuid4().hex[:10]}"
    good = S3ObjectStore(
        endpoint=stack_env["S3_ENDPOINT"],
        access_key=stack_env["S3_ACCESS_KEY"],
        secret_key=stack_env["S3_SECRET_KEY"],
        bucket=bucket,
        secure=False,
        region="us-east-1",
    )
    await good.put("k", b"v")
    assert await good.get("k") == b"v"
    bad = S3ObjectStore(
        endpoint=stack_env["S3_ENDPOINT"],
        access_key=stack_env["S3_ACCESS_KEY"],
        secret_key="wrong-secret",
        bucket=bucket,
        secure=False,
        region="us-east-1",
    )
    with pytest.raises(ObjectStoreError) as err:
        await bad.put("k2", b"v")
    assert "Signature" in str(err.value) or "Access" in str(err.value)
    with pytest.raises(ObjectStoreError):
        await good.get("missing")


async def test_readyz_is_200_when_up_and_503_naming_what_is_down(settings_factory: Any) -> None:
    ok = await settings_factory()
    rt = await build_runtime(ok)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
            r = await c.get("/readyz")
            assert r.status_code == 200, r.text
            assert set(r.json()["checks"]) == {"postgres", "object_store", "kafka"}
            assert (await c.get("/healthz")).json() == {"status": "ok"}
            assert (await c.get("/metrics")).status_code == 401  # the API key (or METRICS_TOKEN) is required
            metrics = await c.get("/metrics", headers={"X-Api-Key": "test-key"})
            assert "orgmem_http_requests_total" in metrics.text
            spec = (await c.get("/asyncapi")).json()
            assert spec["asyncapi"].startswith("3.")
    finally:
        await rt.close()
    broken = await settings_factory(s3_endpoint="127.0.0.1:9", kafka_bootstrap_servers="127.0.0.1:9")
    rt = await build_runtime(broken)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
            r = await c.get("/readyz")
        assert r.status_code == 503
        assert sorted(r.json()["down"]) == ["kafka", "object_store"]
    finally:
        await rt.close()


async def test_service_refuses_unmigrated_or_newer_schema(settings_factory: Any, stack_env: dict[str, str]) -> None:
    s = await settings_factory()
    conn = await asyncpg.connect(s.database_url)
    try:
        assert await check_schema(conn, s.db_schema) == code_version()
        with pytest.raises(SchemaVersionError, match="run `orgmem migrate`"):
            await check_schema(conn, f"never_{uuid.uuid4().hex[:8]}")
        await conn.execute(f'INSERT INTO "{s.db_schema}".schema_migrations VALUES (999, $1, $2)', "future", "x")
        with pytest.raises(SchemaVersionError, match="newer than this code"):
            await build_runtime(s)
        with pytest.raises(SchemaVersionError, match="newer than this code"):
            await migrate(s.database_url, s.db_schema)
    finally:
        await conn.close()


async def test_hnsw_index_lock_is_per_schema(settings_factory: Any) -> None:
    """An index build holding the lock in one namespace does not stall a stage starting in another; within a
    namespace, builds still wait for each other."""
    a, b = await settings_factory(), await settings_factory()
    holder, other, same = await connect(a), await connect(b), await connect(a)
    try:
        await holder.execute("SELECT pg_advisory_lock($1, hashtext(current_schema()))", 727_002)
        name = await asyncio.wait_for(ensure_hnsw_index(other, "hash/v1-8", 8), 10)
        assert await other.fetchval("SELECT count(*) FROM pg_indexes WHERE indexname = $1", name) == 1
        waiting = asyncio.create_task(ensure_hnsw_index(same, "hash/v1-8", 8))
        await asyncio.sleep(0.5)
        assert not waiting.done()  # same schema: serialised behind the holder
        await holder.execute("SELECT pg_advisory_unlock($1, hashtext(current_schema()))", 727_002)
        assert await asyncio.wait_for(waiting, 10) == name
    finally:
        for conn in (holder, other, same):
            await conn.close()
