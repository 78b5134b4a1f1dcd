"""Integration fixtures: real Kafka, Postgres+pgvector and S3.

Where the services come from, in order:
1. environment variables (``DATABASE_URL``, ``KAFKA_BOOTSTRAP_SERVERS``, ``S3_ENDPOINT``, ``S3_ACCESS_KEY``,
   ``S3_SECRET_KEY``) when ``ORGMEM_TEST_USE_ENV=1`` — e.g. a CI job with service containers;
2. otherwise the local stack started by ``deploy/stack.sh`` (session-scoped; cached after the first run).
(testcontainers needs a Docker engine; none runs on our machines, so it is not the default path.)

Every test gets its own topic namespace, consumer-group prefix, Postgres schema and S3 bucket, so
tests never see each other's data; all four are removed again after the test (``ORGMEM_TEST_KEEP=1``
keeps them for debugging), so repeated ``make test`` runs do not grow the local stack.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from services.db.migrate import migrate
from services.settings import Settings, load_settings

REPO = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/tests/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


def _stack_env() -> dict[str, str]:
    if os.environ.get("ORGMEM_TEST_USE_ENV") == "1":
        keys = ("DATABASE_URL", "KAFKA_BOOTSTRAP_SERVERS", "S3_ENDPOINT", "S3_ACCESS_KEY", "S3_SECRET_KEY")
        return {k: os.environ[k] for k in keys} | {"S3_SECURE": os.environ.get("S3_SECURE", "false")}
    subprocess.run([str(REPO / "deploy" / "stack.sh"), "start"], check=True)
    out = subprocess.run([str(REPO / "deploy" / "stack.sh"), "env"], check=True, capture_output=True, text=True)
    env = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    return env


@pytest.fixture(scope="session")
def stack_env() -> dict[str, str]:
    return _stack_env()


def make_settings(stack_env: dict[str, str], **overrides: Any) -> Settings:
    tag = uuid.uuid4().hex[:10]
    base: dict[str, Any] = {
        "database_url": stack_env["DATABASE_URL"],
        "kafka_bootstrap_servers": stack_env["KAFKA_BOOTSTRAP_SERVERS"],
        "object_store_backend": "s3",
        "s3_endpoint": stack_env["S3_ENDPOINT"],
        "s3_access_key": stack_env["S3_ACCESS_KEY"],
        "s3_secret_key": stack_env["S3_SECRET_KEY"],
        "s3_secure": stack_env.get("S3_SECURE", "false") == "true",
        "s3_bucket": f"t-{tag}",
        "db_schema": f"t_{tag}",
        "topic_namespace": f"t{tag}",
        "topic_partitions": 3,
        "group_prefix": f"t{tag}-",
        "service_api_key": "test-key",
        "embedding_provider": "hash",
        "retry_attempts": 2,
        "retry_base_delay_s": 0.05,
        "retry_max_delay_s": 0.2,
        "ingest_batch_size": 200,
    }
    base.update(overrides)
    return load_settings(_env_file=None, **base)


@pytest.fixture
async def settings_factory(stack_env: dict[str, str]) -> AsyncIterator[Any]:
    """Build isolated, migrated settings: ``await settings_factory(**overrides)``; dropped afterwards."""
    made: list[Settings] = []

    async def factory(**overrides: Any) -> Settings:
        s = make_settings(stack_env, **overrides)
        made.append(s)
        await migrate(s.database_url, s.db_schema)
        return s

    yield factory
    if os.environ.get("ORGMEM_TEST_KEEP") == "1":
        return
    for s in made:
        await _teardown(stack_env, s)


async def _teardown(stack_env: dict[str, str], s: Settings) -> None:
    """Drop the test's schema, topics and bucket through the stack's own endpoints (a test may have
    pointed its settings at a dead endpoint on purpose)."""
    from services.objectstore.factory import build_object_store
    from services.objectstore.s3 import S3ObjectStore
    from services.ops.teardown import drop_namespace

    await drop_namespace(
        stack_env["DATABASE_URL"], stack_env["KAFKA_BOOTSTRAP_SERVERS"], schema=s.db_schema, namespace=s.topic_namespace
    )
    store = build_object_store(make_settings(stack_env, s3_bucket=s.s3_bucket))
    assert isinstance(store, S3ObjectStore)
    await store.drop_bucket()


@pytest.fixture
async def settings(settings_factory: Any) -> Settings:
    s: Settings = await settings_factory()
    return s


@pytest.fixture
async def pipeline(settings: Settings) -> AsyncIterator[Any]:
    """Start the given stages in-process on the isolated settings: ``rt = await pipeline("ingest", "embed")``."""
    from services.serve import start_runtime, stop_runtime

    started: list[Any] = []

    async def start(*stages: str, settings_override: Settings | None = None) -> Any:
        rt = await start_runtime(settings_override or settings, list(stages))
        started.append(rt)
        return rt

    yield start
    for rt in reversed(started):
        await stop_runtime(rt)
