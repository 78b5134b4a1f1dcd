"""SIGKILL of the broker and of Postgres under load (issue 12, "faults under load"): 3,000 unique envelopes,
0 lost, 0 duplicated, no dead letter, no operator action. Each runs against a PRIVATE broker / Postgres started
with the deploy scripts' overrides in the test's tmp dir (ports 29092/29093, 55442 — override with
``ORGMEM_RELIABILITY_PG_PORT``), never the shared stack. SIGKILL of the orgmem process itself is
``tests/integration/test_crash_recovery.py``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from services.kafka.clients import producer_config
from services.ops.dlq import read_dead_letters, read_stored_letters
from services.settings import Settings
from tests.integration.conftest import REPO
from tests.integration.helpers import ensure_test_topics, envelope, eventually, fetchval, later, principal

N = 3000
KAFKA_SH = str(REPO / "deploy" / "kafka.sh")
POSTGRES_SH = str(REPO / "deploy" / "postgres.sh")


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "ORGMEM_STATE_DIR": str(tmp_path),
        "ORGMEM_KAFKA_PORT": "29092",
        "ORGMEM_KAFKA_CONTROLLER_PORT": "29093",
        "ORGMEM_KAFKA_JARS": str(REPO / ".state" / "kafka" / "jars"),
        "ORGMEM_PG_PORT": os.environ.get("ORGMEM_RELIABILITY_PG_PORT", "55442"),
    }


async def _load(settings: Settings, envs: list[Any]) -> int:
    """A connector: produce in chunks, and resend a chunk the broker did not acknowledge (the same envelopes
    again — the idempotency key makes a resend harmless). Returns how many chunks had to be resent."""
    await ensure_test_topics(settings)
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap_servers,
        **producer_config(client_id="sigkill-load", request_timeout_ms=5000),
    )
    await producer.start()
    resent = 0
    chunk = 60
    topic = settings.topic("envelopes")
    try:
        for i in range(0, len(envs), chunk):
            while True:
                try:
                    futures = [
                        await producer.send(topic, e.model_dump_json().encode(), key=e.key.encode())
                        for e in envs[i : i + chunk]
                    ]
                    await asyncio.wait_for(asyncio.gather(*futures), 30)
                    break
                except Exception:  # broker down: wait and resend
                    resent += 1
                    await asyncio.sleep(1.0)
            await asyncio.sleep(0.15)
    finally:
        await producer.stop()
    return resent


async def _run(settings: Settings, pipeline: Any, kill: Any, restart: Any) -> dict[str, Any]:
    rt = await pipeline("ingest", settings_override=settings)
    g = principal()
    envs = [
        envelope(f"K/{i}", f"sigkill test document {i}", principals=[g], event_time=later(i % 600)) for i in range(N)
    ]
    load = asyncio.create_task(_load(settings, envs))
    await asyncio.sleep(3.0)
    await kill()
    await asyncio.sleep(3.0)
    await restart()
    resent = await load
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM documents"), until=lambda c: c >= N, timeout=300)
    await asyncio.sleep(1.0)
    return {
        "documents": await fetchval(settings, "SELECT count(*) FROM documents"),
        "versions": await fetchval(settings, "SELECT count(*) FROM document_versions"),
        "dead_letters": len(await read_dead_letters(settings, "ingest"))
        + len(await read_stored_letters(settings, "ingest")),
        "resent_chunks": resent,
        "pauses": rt.watches["ingest"].pauses,
    }


def _assert_clean(f: dict[str, Any]) -> None:
    assert f["documents"] == N  # 0 lost
    assert f["versions"] == N  # 0 duplicated
    assert f["dead_letters"] == 0  # a crash is not poison


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_sigkill_of_the_broker_under_load(tmp_path: Path, settings_factory: Any, pipeline: Any) -> None:
    env = _env(tmp_path)
    subprocess.run([KAFKA_SH, "start"], env=env, check=True)
    try:
        settings: Settings = await settings_factory(kafka_bootstrap_servers="127.0.0.1:29092", ingest_batch_size=200)

        async def kill() -> None:
            subprocess.run([KAFKA_SH, "kill"], env=env, check=True)

        async def restart() -> None:
            subprocess.run([KAFKA_SH, "start"], env=env, check=True)

        f = await _run(settings, pipeline, kill, restart)
        print(f"\nbroker SIGKILL under {N} envelopes: {f}")
        _assert_clean(f)
    finally:
        subprocess.run([KAFKA_SH, "stop"], env=env, check=False)


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_sigkill_of_postgres_under_load(tmp_path: Path, settings_factory: Any, pipeline: Any) -> None:
    env = _env(tmp_path)
    subprocess.run([POSTGRES_SH, "start"], env=env, check=True)
    try:
        dsn = subprocess.run([POSTGRES_SH, "dsn"], env=env, check=True, capture_output=True, text=True).stdout.strip()
        settings: Settings = await settings_factory(database_url=dsn, ingest_batch_size=200)
        pidfile = tmp_path / "postgres" / "data" / "postmaster.pid"

        async def kill() -> None:
            os.kill(int(pidfile.read_text().splitlines()[0]), signal.SIGKILL)

        async def restart() -> None:
            for _ in range(50):  # the orphaned backends exit once the postmaster is gone
                if subprocess.run([POSTGRES_SH, "start"], env=env, check=False).returncode == 0:
                    return
                await asyncio.sleep(0.5)
            raise AssertionError("private Postgres did not restart")

        f = await _run(settings, pipeline, kill, restart)
        print(f"\nPostgres SIGKILL under {N} envelopes: {f}")
        _assert_clean(f)
    finally:
        subprocess.run([POSTGRES_SH, "stop"], env=env, check=False)
