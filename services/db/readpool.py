"""Reads from a streaming replica (``DATABASE_READ_URL``), with read-your-writes and a fallback to the primary.

``ReadPool.acquire()`` quacks like ``asyncpg.Pool.acquire()`` for the retriever's read queries. Each acquire of a
replica connection asks the replica ``pg_last_wal_replay_lsn()`` (a ping and a lag check in one round trip):

- the replica is unreachable or the connection is dead -> the read goes to the primary, the replica is skipped for
  ``RECHECK_S`` and ``status()`` says why (``/readyz`` and the retriever's diagnostics show it);
- the caller passed a token (``MIN_LSN``, set from the ``X-Min-Lsn`` header: the ``X-Primary-Lsn`` a write's reply
  carried) the replica has not replayed yet -> wait for it, bounded by ``READ_MIN_LSN_WAIT_S``; past the bound the
  read goes to the primary (never a stale answer to a caller who asked for its own write).

Writes, claims and anything that must read its own write keep using the primary pool (``Runtime.pool``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

import asyncpg

log = logging.getLogger("orgmem.readpool")

RECHECK_S = 5.0
CONNECT_TIMEOUT_S = 2.0
POLL_S = 0.02

MIN_LSN: ContextVar[str | None] = ContextVar("orgmem_min_lsn", default=None)
"""The LSN the current request must see (``X-Min-Lsn``); ``None`` = any replayed state will do."""


def parse_lsn(text: str) -> int:
    """``'16/B374D848'`` -> an integer (Postgres's pg_lsn text form); ``ValueError`` when malformed."""
    hi, sep, lo = text.strip().partition("/")
    if not sep or not hi or not lo or len(hi) > 8 or len(lo) > 8:
        raise ValueError(f"not an LSN: {text!r} (expected hex/hex, e.g. 0/16B3748)")
    return (int(hi, 16) << 32) | int(lo, 16)


def format_lsn(value: int) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


class ReadPool:
    """The replica pool for reads (primary fallback); ``replica=None`` -> every read goes to the primary."""

    def __init__(self, primary: asyncpg.Pool, replica: asyncpg.Pool | None, *, wait_s: float = 2.0) -> None:
        self.primary = primary
        self.replica = replica
        self.wait_s = wait_s
        self._down_until = 0.0
        self._down_reason: str | None = None
        self.routed = {"replica": 0, "primary": 0}

    def status(self) -> dict[str, Any]:
        """``{"configured", "serving", "reason"}``: what reads use now and, on fallback, why."""
        if self.replica is None:
            return {"configured": False, "serving": "primary", "reason": "DATABASE_READ_URL not set"}
        if self._down_reason is not None:
            return {"configured": True, "serving": "primary", "reason": f"replica unavailable: {self._down_reason}"}
        return {"configured": True, "serving": "replica", "reason": None}

    async def check(self) -> str:
        """The replica's replay position (a readiness probe); raises when it is unreachable."""
        if self.replica is None:
            return "not configured (reads use the primary)"
        try:
            conn = await asyncio.wait_for(self.replica.acquire(), CONNECT_TIMEOUT_S)
            try:
                lsn = await conn.fetchval("SELECT pg_last_wal_replay_lsn()::text", timeout=CONNECT_TIMEOUT_S)
            finally:
                await self.replica.release(conn)
        except Exception as exc:
            self._mark_down(exc)
            raise
        self._down_reason = None
        self._down_until = 0.0
        return f"replayed to {lsn}"

    def _mark_down(self, exc: BaseException) -> None:
        if self._down_reason is None:
            log.warning("read replica unavailable, reads fall back to the primary: %s", exc)
        self._down_reason = f"{type(exc).__name__}: {exc}"[:200]
        self._down_until = time.monotonic() + RECHECK_S

    async def _replica_conn(self) -> asyncpg.Connection | None:
        """A live replica connection that has replayed ``MIN_LSN`` (waiting, bounded), else ``None``."""
        if self.replica is None or time.monotonic() < self._down_until:
            return None
        want = MIN_LSN.get()
        want_n = parse_lsn(want) if want else 0
        try:
            conn = await asyncio.wait_for(self.replica.acquire(), CONNECT_TIMEOUT_S)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
            self._mark_down(exc)
            return None
        deadline = time.monotonic() + self.wait_s
        try:
            while True:
                replayed = await conn.fetchval("SELECT pg_last_wal_replay_lsn()::text", timeout=CONNECT_TIMEOUT_S)
                if replayed is None:  # not a standby (promoted, or pointed at a primary): it has every write
                    break
                if parse_lsn(replayed) >= want_n:
                    break
                if time.monotonic() >= deadline:
                    await self.replica.release(conn)
                    return None  # behind the caller's write for longer than the bound: the primary answers
                await asyncio.sleep(POLL_S)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
            self._mark_down(exc)
            conn.terminate()
            await self.replica.release(conn)
            return None
        self._down_reason = None
        return conn

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[asyncpg.Connection]:
        conn = await self._replica_conn()
        if conn is not None:
            assert self.replica is not None
            self.routed["replica"] += 1
            try:
                yield conn
            finally:
                await self.replica.release(conn)
            return
        self.routed["primary"] += 1
        async with self.primary.acquire() as primary_conn:
            yield primary_conn

    async def close(self) -> None:
        if self.replica is not None:
            await self.replica.close()


async def primary_lsn(pool: asyncpg.Pool) -> str:
    """The primary's current WAL position: a read-your-writes token for every write committed before it."""
    async with pool.acquire() as conn:
        return str(await conn.fetchval("SELECT pg_current_wal_lsn()::text"))
