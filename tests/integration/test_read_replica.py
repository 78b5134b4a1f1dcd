"""A real streaming replica (pg_basebackup -R from a private primary, both from the pgserver binaries): reads go
to it, wait (bounded) for a caller's write LSN, and fall back to the primary when it is SIGKILLed."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from services.db.readpool import MIN_LSN, ReadPool, parse_lsn, primary_lsn

pytestmark = pytest.mark.integration

PG_USER = os.environ.get("ORGMEM_PG_OS_USER", "orgmem-pg")


def _pgbin() -> Path:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

    return Path(os.path.dirname(pgserver.__file__)) / "pginstall" / "bin"


def _as_pg(*cmd: str | Path) -> list[str]:
    args = [str(c) for c in cmd]
    return ["runuser", "-u", PG_USER, "--", *args] if os.geteuid() == 0 else args


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(*cmd: str | Path) -> None:
    subprocess.run(_as_pg(*cmd), check=True, capture_output=True, timeout=60)


@pytest.fixture
def primary_and_replica() -> Iterator[tuple[str, str, Path]]:
    if os.geteuid() == 0 and subprocess.run(["id", "-u", PG_USER], capture_output=True).returncode != 0:
        pytest.skip(f"no OS user {PG_USER} (deploy/postgres.sh creates it)")
    bin_ = _pgbin()
    root = Path(tempfile.mkdtemp(prefix="orgmem-replica-"))
    root.chmod(0o755)
    if os.geteuid() == 0:
        shutil.chown(root, PG_USER)
    primary, replica = root / "primary", root / "replica"
    pport, rport = _free_port(), _free_port()
    try:
        _run(bin_ / "initdb", "-D", primary, "-U", "postgres", "--auth=trust", "--locale=C")
        conf = (
            f"listen_addresses='127.0.0.1'\nport={pport}\nunix_socket_directories='{root}'\n"
            "wal_level=replica\nmax_wal_senders=4\nshared_buffers=32MB\nfsync=off\n"
        )
        subprocess.run(
            _as_pg("tee", "-a", primary / "postgresql.conf"), input=conf.encode(), check=True, capture_output=True
        )
        hba = "host replication postgres 127.0.0.1/32 trust\n"
        subprocess.run(
            _as_pg("tee", "-a", primary / "pg_hba.conf"), input=hba.encode(), check=True, capture_output=True
        )
        _run(bin_ / "pg_ctl", "-D", primary, "-l", root / "primary.log", "-w", "start")
        _run(
            bin_ / "pg_basebackup",
            "-h",
            "127.0.0.1",
            "-p",
            str(pport),
            "-U",
            "postgres",
            "-D",
            replica,
            "-R",
            "-X",
            "stream",
        )
        subprocess.run(
            _as_pg("tee", "-a", replica / "postgresql.auto.conf"),
            input=f"port={rport}\n".encode(),
            check=True,
            capture_output=True,
        )
        _run(bin_ / "pg_ctl", "-D", replica, "-l", root / "replica.log", "-w", "start")
        yield (
            f"postgresql://postgres@127.0.0.1:{pport}/postgres",
            f"postgresql://postgres@127.0.0.1:{rport}/postgres",
            replica,
        )
    finally:
        for d in (replica, primary):
            if (d / "PG_VERSION").exists():
                subprocess.run(_as_pg(bin_ / "pg_ctl", "-D", d, "-m", "immediate", "-w", "stop"), capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


async def _served_by(reads: ReadPool) -> str:
    async with reads.acquire() as conn:
        return "replica" if await conn.fetchval("SELECT pg_is_in_recovery()") else "primary"


async def test_reads_use_the_replica_wait_for_a_write_and_fall_back_when_it_dies(
    primary_and_replica: tuple[str, str, Path],
) -> None:
    primary_dsn, replica_dsn, replica_dir = primary_and_replica
    primary = await asyncpg.create_pool(primary_dsn, min_size=1, max_size=2)
    replica = await asyncpg.create_pool(replica_dsn, min_size=0, max_size=2)
    reads = ReadPool(primary, replica, wait_s=5.0)
    try:
        assert await _served_by(reads) == "replica"
        assert reads.status()["serving"] == "replica"

        # read-your-writes: a write's LSN token, passed back, is seen on the replica
        async with primary.acquire() as conn:
            await conn.execute("CREATE TABLE t (v int)")
            await conn.execute("INSERT INTO t VALUES (42)")
        token = await primary_lsn(primary)
        MIN_LSN.set(token)
        async with reads.acquire() as conn:
            assert await conn.fetchval("SELECT pg_is_in_recovery()") is True
            assert await conn.fetchval("SELECT v FROM t") == 42
            assert parse_lsn(await conn.fetchval("SELECT pg_last_wal_replay_lsn()::text")) >= parse_lsn(token)

        # a token the replica cannot reach within the bound -> the primary answers (never a stale read)
        MIN_LSN.set("FFFFFFFF/0")
        reads.wait_s = 0.3
        assert await _served_by(reads) == "primary"
        MIN_LSN.set(None)

        # SIGKILL the replica: reads keep answering, from the primary, and say why
        pid = int((replica_dir / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
                await asyncio.sleep(0.1)
            except ProcessLookupError:
                break
        for _ in range(3):
            assert await _served_by(reads) == "primary"
        status = reads.status()
        assert status["serving"] == "primary" and "replica unavailable" in status["reason"]
        with pytest.raises((OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError)):
            await reads.check()
    finally:
        MIN_LSN.set(None)
        await reads.close()
        await primary.close()
