"""Faults on the local cluster (deploy/cluster.sh, its own state dir), real processes, SIGKILL, under load.

- one Kafka broker of three SIGKILLed while envelopes stream in: 0 lost, 0 duplicated in the log or the
  projection, producing never pauses longer than a leader election (bounded here at ``MAX_PAUSE_S`` on a shared
  2-core machine); the broker, restarted, rejoins every partition's ISR;
- one ingest worker of two SIGKILLed: the other takes its partitions; 0 lost, 0 duplicated;
- the streaming replica SIGKILLed: searches keep answering (from the primary, saying so); /readyz stays 200.

Slow (a three-broker cluster plus six orgmem processes): ``make test-reliability`` only.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from aiokafka import AIOKafkaConsumer

from services.kafka.records import stop_consumer, topic_partitions
from services.producer.client import EnvelopeProducer
from tests.integration.conftest import REPO
from tests.integration.helpers import envelope

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

SCRIPT = REPO / "deploy" / "cluster.sh"
RATE = int(os.environ.get("ORGMEM_CLUSTER_RATE", "1000"))  # envelopes/s offered
SECONDS = int(os.environ.get("ORGMEM_CLUSTER_SECONDS", "8"))
MAX_PAUSE_S = 30.0
TOPIC = "om.envelopes.v1"


def _taken(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _sh(env: dict[str, str], *args: str) -> None:
    subprocess.run([str(SCRIPT), *args], env=env, check=True, timeout=600)


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[str, str]]:
    if any(_taken(p) for p in (8000, 8001, 29192, 29292, 29392, 55472, 55473)):
        pytest.skip("a cluster (or something else) holds the cluster's ports: make cluster-down first")
    root = Path(tempfile.mkdtemp(prefix="orgmem-cluster-"))
    root.chmod(0o755)
    env = {**os.environ, "ORGMEM_CLUSTER_DIR": str(root / "cluster")}
    try:
        _sh(env, "up")
        values = dict(
            line.split("=", 1) for line in (root / "cluster" / "cluster.env").read_text().splitlines() if "=" in line
        )
        yield {**values, "_env_dir": str(root / "cluster")}
    finally:
        subprocess.run([str(SCRIPT), "down", "--purge"], env=env, timeout=300)
        shutil.rmtree(root, ignore_errors=True)


def _shell_env(c: dict[str, str]) -> dict[str, str]:
    return {**os.environ, "ORGMEM_CLUSTER_DIR": c["_env_dir"]}


async def _log_end(bootstrap: str) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = await topic_partitions(consumer, TOPIC)
        assert tps, f"no partitions of {TOPIC}"
        ends = await consumer.end_offsets(tps)
        return int(sum(ends.values()))
    finally:
        await stop_consumer(consumer)


async def _stream(c: dict[str, str], run: str, fault: Any) -> dict[str, Any]:
    """Offer RATE envelopes/s for SECONDS; ``fault()`` at 40 %. Returns the counts and the longest pause."""
    n = RATE * SECONDS
    group = f"group:{uuid.uuid4()}"
    envs = [envelope(f"{run}-{i}", f"cluster fault {run} record {i}", principals=[group]) for i in range(n)]
    bootstrap = c["KAFKA_BOOTSTRAP_SERVERS"]
    before = await _log_end(bootstrap)
    batch = max(1, RATE // 10)
    longest, last_ack, start = 0.0, time.monotonic(), time.monotonic()
    async with EnvelopeProducer(bootstrap, topic=TOPIC) as producer:
        for k in range(0, n, batch):
            if k <= int(n * 0.4) < k + batch:
                await asyncio.to_thread(fault)
            await producer.send_many(envs[k : k + batch])
            now = time.monotonic()
            longest, last_ack = max(longest, now - last_ack), now
            ahead = (k + batch) / RATE - (now - start)
            if ahead > 0:
                await asyncio.sleep(ahead)
    produced_s = time.monotonic() - start
    in_log = await _log_end(bootstrap) - before
    conn = await asyncpg.connect(c["DATABASE_URL"])
    try:
        deadline = time.monotonic() + 300
        while True:
            docs = await conn.fetchval("SELECT count(*) FROM orgmem.documents WHERE external_id LIKE $1", f"{run}-%")
            if docs >= n or time.monotonic() > deadline:
                break
            await asyncio.sleep(1)
        versions = await conn.fetchval(
            "SELECT count(*) FROM orgmem.document_versions v JOIN orgmem.documents d ON d.id = v.document_id"
            " WHERE d.external_id LIKE $1",
            f"{run}-%",
        )
    finally:
        await conn.close()
    out = {
        "n": n,
        "in_log": in_log,
        "documents": docs,
        "versions": versions,
        "longest_pause_s": round(longest, 2),
        "offered_per_s": RATE,
        "achieved_per_s": round(n / produced_s, 1),
    }
    print("cluster fault:", out)
    return out


async def test_broker_sigkill_under_load_loses_and_duplicates_nothing(cluster: dict[str, str]) -> None:
    env = _shell_env(cluster)
    got = await _stream(cluster, f"b-{uuid.uuid4().hex[:8]}", lambda: _sh(env, "kill-broker", "2"))
    assert got["in_log"] == got["n"], "the log holds each envelope once (idempotent acks=all producer)"
    assert got["documents"] == got["n"] and got["versions"] == got["n"], got
    assert got["longest_pause_s"] < MAX_PAUSE_S, got
    _sh(env, "start-broker", "2")
    bootstrap = cluster["KAFKA_BOOTSTRAP_SERVERS"]
    deadline = time.monotonic() + 120
    while True:  # the restarted broker catches up: back in every partition's ISR
        out = subprocess.run(
            [
                "java",
                "-cp",
                str(REPO / ".state/kafka/jars/*"),
                "org.apache.kafka.tools.TopicCommand",
                "--bootstrap-server",
                bootstrap,
                "--describe",
                "--under-replicated-partitions",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if out.returncode == 0 and not out.stdout.strip():
            break
        assert time.monotonic() < deadline, f"still under-replicated: {out.stdout[-2000:]}"
        await asyncio.sleep(3)


async def test_ingest_worker_sigkill_loses_and_duplicates_nothing(cluster: dict[str, str]) -> None:
    env = _shell_env(cluster)
    try:
        got = await _stream(cluster, f"w-{uuid.uuid4().hex[:8]}", lambda: _sh(env, "kill-worker", "ingest-1"))
    finally:
        _sh(env, "start-worker", "ingest-1")
    assert got["in_log"] == got["n"]
    assert got["documents"] == got["n"] and got["versions"] == got["n"], got


async def test_replica_sigkill_reads_answer_from_the_primary(cluster: dict[str, str]) -> None:
    env = _shell_env(cluster)
    key, group = cluster["SERVICE_API_KEY"], f"group:{uuid.uuid4()}"
    headers = {"X-Api-Key": key, "X-Principal-Id": f"user:{uuid.uuid4()}", "X-Principal-Groups": group}
    body = {"query": "cluster fault record", "limit": 5}
    async with httpx.AsyncClient(base_url="http://127.0.0.1:8000", timeout=30) as http:
        r = await http.post("/tools/search_knowledge_base", json=body, headers=headers)
        assert r.status_code == 200 and r.json()["diagnostics"]["reads"]["serving"] == "replica", r.text
        _sh(env, "kill-replica")
        try:
            await asyncio.sleep(1)
            for _ in range(5):
                r = await http.post("/tools/search_knowledge_base", json=body, headers=headers)
                assert r.status_code == 200, r.text
            reads = r.json()["diagnostics"]["reads"]
            assert reads["serving"] == "primary" and "replica unavailable" in reads["reason"], reads
            ready = await http.get("/readyz")
            assert ready.status_code == 200 and ready.json()["checks"]["read_replica"]["ok"] is False
        finally:
            _sh(env, "start-replica")
