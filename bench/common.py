"""Shared benchmark plumbing: an isolated stack namespace, result files, percentiles."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from services.db.migrate import migrate
from services.kafka.topics import ensure_topics
from services.settings import Settings, load_settings


def stack_env() -> dict[str, str]:
    """The local stack's connection settings, or (``ORGMEM_BENCH_USE_ENV=1``) those in the environment."""
    if os.environ.get("ORGMEM_BENCH_USE_ENV") == "1":
        keys = ("DATABASE_URL", "KAFKA_BOOTSTRAP_SERVERS", "S3_ENDPOINT", "S3_ACCESS_KEY", "S3_SECRET_KEY")
        return {k: os.environ[k] for k in keys}
    subprocess.run([str(REPO / "deploy" / "stack.sh"), "start"], check=True)
    out = subprocess.run([str(REPO / "deploy" / "stack.sh"), "env"], check=True, capture_output=True, text=True)
    return dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)


async def isolated_settings(tag: str, **overrides: Any) -> Settings:
    env = stack_env()
    t = f"{tag}{uuid.uuid4().hex[:8]}"
    base: dict[str, Any] = {
        "database_url": env["DATABASE_URL"],
        "kafka_bootstrap_servers": env["KAFKA_BOOTSTRAP_SERVERS"],
        "object_store_backend": "s3",
        "s3_endpoint": env["S3_ENDPOINT"],
        "s3_access_key": env["S3_ACCESS_KEY"],
        "s3_secret_key": env["S3_SECRET_KEY"],
        "s3_secure": False,
        "s3_bucket": f"b-{t}",
        "db_schema": f"bench_{t}",
        "topic_namespace": f"b{t}",
        "group_prefix": f"b{t}-",
        "service_api_key": "bench-key",
        "embedding_provider": "hash",
        "topic_partitions": 12,
    }
    base.update(overrides)
    settings = load_settings(_env_file=None, **base)
    await migrate(settings.database_url, settings.db_schema)
    await ensure_topics(settings)
    return settings


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, round(p / 100 * (len(s) - 1))))
    return s[k]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def write_result(name: str, result: dict[str, Any]) -> Path:
    out = REPO / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps(result, indent=2, default=str))
    return path


async def drop(settings: Settings) -> None:
    """Remove a bench namespace again: schema, topics and bucket (the shared broker should not pile up)."""
    from services.objectstore.factory import build_object_store
    from services.objectstore.s3 import S3ObjectStore
    from services.ops.teardown import drop_namespace

    await drop_namespace(
        settings.database_url,
        settings.kafka_bootstrap_servers,
        schema=settings.db_schema,
        namespace=settings.topic_namespace,
    )
    store = build_object_store(settings)
    if isinstance(store, S3ObjectStore):
        await store.drop_bucket()
