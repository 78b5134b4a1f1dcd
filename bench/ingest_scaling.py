"""Two ingest workers over one, with the CPU split (issue 25 §4): ``make bench`` prints it.

Each run: a fresh namespace, ``n`` envelopes pre-produced, then ``k`` ``orgmem run --stage ingest`` processes (one
consumer group) drain them. The clock and the CPU counters run from the first applied batch to the last one
(group joins and start-up excluded). CPU seconds are ``utime + stime`` from ``/proc/<pid>/stat``, read before
and after, for: the workers; the Postgres backends serving them (found by the workers' TCP client ports in
``pg_stat_activity``); the broker (the local stack's one JVM: it also serves every other client on the
machine, so its share is an upper bound). On 2 cores two workers can at most share what one worker leaves idle:
the split says where a machine with more cores would add throughput (workers, Postgres or the broker).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import REPO, drop, isolated_settings

from schemas.envelope import ChangeEnvelope
from services.db.pool import create_pool
from services.producer import EnvelopeProducer
from services.settings import Settings

TICK = os.sysconf("SC_CLK_TCK")
DONE_SQL = "SELECT count(*) FROM processed_events WHERE stage = 'ingest'"


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def _socket_inodes(pid: int) -> set[str]:
    out: set[str] = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(target[8:-1])
    return out


def client_ports(pids: list[int]) -> set[int]:
    """Local TCP ports of the processes' sockets (/proc/net/tcp, tcp6)."""
    inodes: set[str] = set()
    for pid in pids:
        inodes |= _socket_inodes(pid)
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[9] in inodes:
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def broker_pid() -> int | None:
    pid_file = REPO / ".state" / "kafka" / "kafka.pid"
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


async def backend_pids(conn: Any, workers: list[int]) -> list[int]:
    ports = sorted(client_ports(workers))
    rows = await conn.fetch("SELECT pid FROM pg_stat_activity WHERE client_port = ANY($1::int[])", ports)
    return [int(r["pid"]) for r in rows]


async def _snapshot(conn: Any, workers: list[int]) -> dict[str, dict[int, float]]:
    kafka = broker_pid()
    return {
        "workers": {p: cpu_seconds(p) for p in workers},
        "postgres": {p: cpu_seconds(p) for p in await backend_pids(conn, workers)},
        "broker": {kafka: cpu_seconds(kafka)} if kafka else {},
    }


def _split(before: dict[str, dict[int, float]], after: dict[str, dict[int, float]]) -> dict[str, float]:
    """CPU seconds per part over the interval (a backend first seen after the start counts from 0)."""
    return {part: round(sum(v - before[part].get(pid, 0.0) for pid, v in after[part].items()), 2) for part in after}


async def run(settings: Settings, envs: list[ChangeEnvelope], workers: int, timeout: float = 600) -> dict[str, Any]:
    async with EnvelopeProducer(settings.kafka_bootstrap_servers, topic=settings.topic("envelopes")) as p:
        await p.send_many(envs)
    # ``python -m services.cli`` from the checkout: the venv's ``orgmem`` script may import another checkout
    env = {**os.environ, **settings.to_env()}
    cmd = [sys.executable, "-m", "services.cli", "run", "--stage", "ingest"]
    procs = [
        subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(workers)
    ]
    pids = [p.pid for p in procs]
    pool = await create_pool(settings, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            began = time.perf_counter()
            first: tuple[float, int, dict[str, dict[int, float]]] | None = None
            while time.perf_counter() - began < timeout:
                if any(proc.poll() is not None for proc in procs):
                    raise RuntimeError(f"an ingest worker exited: {[proc.returncode for proc in procs]}")
                n = int(await conn.fetchval(DONE_SQL))
                if n and first is None:
                    first = (time.perf_counter(), n, await _snapshot(conn, pids))
                if n >= len(envs) and first is not None:
                    after = await _snapshot(conn, pids)
                    secs = time.perf_counter() - first[0]
                    rate = (n - first[1]) / secs if secs > 0 else float("nan")
                    return {"workers": workers, "envelopes_per_s": round(rate), "cpu_s": _split(first[2], after)}
                await asyncio.sleep(0.02)
        raise TimeoutError(f"{workers} ingest worker(s) did not drain {len(envs)} envelopes in {timeout}s")
    finally:
        await pool.close()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)


async def two_over_one(envs: list[ChangeEnvelope]) -> tuple[dict[str, Any], dict[str, Any]]:
    """One worker, then two, each on its own fresh namespace with the same envelopes."""
    out = []
    for workers in (1, 2):
        settings = await isolated_settings(f"sc{workers}")
        try:
            out.append(await run(settings, envs, workers))
        finally:
            await drop(settings)
    return out[0], out[1]
